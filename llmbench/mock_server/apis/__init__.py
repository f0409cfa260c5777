"""One handler module per API the mock serves, each parsing its own body and shaping its own
reply on the shared generation (generate.py): chat (/v1/chat/completions), completions
(/v1/completions), responses (/v1/responses), messages (Anthropic's /v1/messages), ollama
(/api/chat, /api/generate and Ollama's model routes), embeddings (/v1/embeddings). Each has
``add_routes(app, ctx)``."""
