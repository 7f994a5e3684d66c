"""The optional LLM and what works with or without it: the OpenAI-compatible client and its tool-calling
loop (`client`), smart tool selection (`selection`) and the `/v1/chat` conversation (`chat`)."""
