"""The product catalogue: public reads for clients, writes for admin keys and the CLI."""
