"""QueryPlanner: placeholder that searches the whole question."""
from __future__ import annotations
class QueryPlanner:
    def __init__(self, index, encode):
        self.index = index; self.encode = encode
    def search(self, q, v, k, method=None, alpha=None):
        return self.index.search(q, v, k, method=method, alpha=alpha)
    def rank_servers(self, q, v, k, method=None, alpha=None):
        return self.index.rank_servers(q, v, k, method=method, alpha=alpha)
