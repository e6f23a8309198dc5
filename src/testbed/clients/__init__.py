"""Protocol clients: OpenAI-compatible and TGI over HTTP, with the SSE parser."""
