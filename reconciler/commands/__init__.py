"""One module per `migplan` subcommand; each exposes `command` (a click.Command)."""
