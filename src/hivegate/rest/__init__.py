"""The original platform's REST plane: ``POST /{agentId}/v1/invoke`` (:mod:`hivegate.rest.invoke`),
its error body (:mod:`hivegate.rest.rendering`). See ``docs/rest.md``."""
