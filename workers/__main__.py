"""`python -m workers`: the same CLI as the `remedy` command."""

from workers.cli import main

main()
