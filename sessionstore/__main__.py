"""`python -m sessionstore`: the same command line as the `sessionstore` script."""

from sessionstore.cli import main

if __name__ == "__main__":
    main()
