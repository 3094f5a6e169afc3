"""Webhooks (issue 51): a tenant's endpoints hear its lease events and the service's
alerts, signed by the Standard Webhooks specification, retried, never lost.

The pure parts: ``payload`` (an event to the payload a receiver gets, ``EVENT_TYPES``),
``signing`` (the ``webhook-*`` headers: ``v1`` HMAC per secret, ``v1a`` Ed25519 with the
deployment's signing key), ``urls`` (where a delivery may go: checked at creation and at
each send) and ``crypto`` (endpoint secrets encrypted at rest). Then ``store`` (the
endpoints, deliveries and attempts in the database), ``deliver`` (sends what is due) and
``alerts`` (the events the service computes). The entry points are
``functions/webhooks/main.py``.
"""
