"""What the router accepts from backends it does not control (`security`): limits, cleaning, pins, checks."""

from __future__ import annotations

from pydantic import Field

from router.settings.base import Strict


class SecuritySettings(Strict):
    """What the router accepts from backends it does not control: their tool names, descriptions, schemas."""

    max_name_length: int = Field(default=128, ge=1, description=(
        "Longest capability name accepted; a catalog with a longer one is rejected whole."))
    max_description_length: int = Field(default=8192, ge=1, description=(
        "Longest description (server or capability, title included) accepted; longer: the catalog is rejected."))
    max_schema_bytes: int = Field(default=32768, ge=2, description=(
        "Largest input schema (as JSON, in bytes) accepted; larger: the catalog is rejected."))
    max_capabilities: int = Field(default=2000, ge=0, description=(
        "Most capabilities one backend may list; more: the catalog is rejected."))
    max_answer_bytes: int = Field(default=16 * 2**20, ge=1024, description=(
        "Largest answer one call may bring back, in bytes (a flow's body as sent; an MCP result's content "
        "blocks and structured result as UTF-8 JSON); a larger one is refused with `answer_too_large` (502), "
        "not counted against the backend, and a flow's body is not read past it."))
    pin_tools: bool = Field(default=True, description=(
        "Record a hash of each capability's name, description and schema the first time it is seen (in "
        "`state_dir`/pins, or from `lock_file`); a definition that changes later is held out of routing "
        "until `mcp-router approve BACKEND[/TOOL]`."))
    lock_file: str = Field(default="mcp-router.lock.json", description=(
        "Pins the operator commits (`mcp-router lock` writes it), relative to the config file; used when it "
        "exists: a backend listed in it has exactly those capabilities approved."))
    quarantine_suspicious: bool = Field(default=False, description=(
        "Hold out of routing the capabilities whose descriptions address the model (\"ignore previous "
        "instructions\", requests to read files or send data elsewhere, hidden text); they are always reported "
        "on /v1/backends."))
