"""The router's pure logic: no Ray, MCP SDK, HTTP client or web framework (a unit test checks).

    router = Router(settings, executor=..., embed=..., stats=...)    # core.py: runs the stages
    response = await router.query(request)                          # a `values.Request`, built at the edge

`core` runs the stages (`stages/`: analyse, decide, plan, execute, respond, and the optional LLM steps)
over frozen values (`values`), with the execution strategies (`strategies/`); `models` are the edge's
request and response models, `literals` the names they share, `errors` the one error tree. Concerns each
have a folder: `settings/`, `retrieval/`, `resilience/`, `learning/`, `trust/`, `security/`, `llm/`.
"""
