"""Events (``order.created``…): the outbox the webhook dispatcher delivers from, and ``/v1/events``.

May import: ``core``, ``settings``, ``storage``, ``accounts``, ``http``, ``audit`` and
``webhooks`` (an event is delivered to the endpoints that want it); ``webhooks`` never imports
this package.
"""
