"""The router core as a pipeline of stages over frozen values:

    analyse  question                      -> Analysis   (vector, intent)          stages/analyse.py
    decide   Analysis + live state         -> Decision   (ranked candidates, verdict) stages/decide.py
    plan     Decision + request            -> Plan       (calls in order, or a refusal) stages/plan.py
    execute  Plan                          -> StrategyResult (attempt chain)         stages/execute.py
    respond  StrategyResult + Decision     -> QueryResponse, or the error it means   stages/respond.py

Each stage runs once per request and is testable alone; `router.core.Router` runs them in order.
The optional LLM steps (`stages/assist.py`) wrap decide and plan; the caches wrap analyse (the
question's vector and intent), decide's retrieval and execute (the answer served when every backend
is down).
"""
