"""``python -m zerocalc.cli`` runs the CLI."""

from zerocalc.cli import main

main()
