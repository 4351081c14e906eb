"""``python -m hivegate`` runs the command line."""

from hivegate.cli import main

main()
