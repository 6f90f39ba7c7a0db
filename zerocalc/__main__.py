"""``python -m zerocalc`` runs the CLI."""

from zerocalc.cli import main

main()
