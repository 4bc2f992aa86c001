"""`python -m api.cli ...`: the same as the installed `veernet` script."""

from api.cli.main import main

main()
