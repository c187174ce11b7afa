"""Core: the rules every layer shares, with no I/O of their own.

- ``errors``: the error contract (codes, statuses, the ``{"error": …}`` envelope, ``APIError``).
- ``ids``: prefixed ids (``prod_…``) and request ids; ``money``: decimal amounts and currencies;
  ``timestamps``: UTC times as the API writes them; ``pagination``: ``limit``/``offset`` pages.
- ``coalescing``: one network round trip shared by every caller waiting for it (``Rounds``).
- ``tracing``: whether spans are made (one boolean, off by default) and how; ``spans`` makes them
  with OpenTelemetry's API, imported only once tracing is on.

May import: the standard library and third-party packages only (no other ``commerce_api``
package, not even ``settings``). Everything else may import it.
"""
