"""The product catalogue: public reads for clients, writes for admin keys and the CLI.

May import: ``core``, ``settings``, ``storage``, ``accounts``, ``http`` (its routes) and
``audit`` (its changes are audited). ``readpath`` builds its cached reads on this package's
declarations, so this package never imports it.
"""
