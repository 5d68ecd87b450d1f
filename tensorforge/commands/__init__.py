"""One module per `tensorforge` subcommand; see `tensorforge.cli`."""
