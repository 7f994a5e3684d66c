"""The optional LLM and what works with or without it: the OpenAI-compatible client (`client`), its
tool-calling loop (`tool_loop`), smart tool selection (`selection`) and the `/v1/chat` conversation (`chat`)."""
