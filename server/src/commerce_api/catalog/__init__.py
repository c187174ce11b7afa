"""The product catalogue: public reads for clients, writes for admin keys and the CLI.

May import: ``core``, ``settings``, ``storage`` and ``http`` (its routes). ``readpath``
builds its cached reads on this package's declarations, so this package never imports it.
"""
