"""The A2A plane: every agent of the registry as an A2A 1.0 agent (so far its public Agent Card).

Modules: ``card.py`` (cards from agent specs, as a2a-sdk types), ``card_routes.py`` (the card
endpoints: ETag, ``Cache-Control``, legacy paths), ``rendering.py`` (the plane's error bodies).
Spec: A2A 1.0 (``docs/a2a.md``).
"""
