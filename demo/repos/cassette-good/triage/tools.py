"""The agent's tools, answered from local data so a run never depends on other services."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class ToolBox:
    def __init__(self, data_dir: Path) -> None:
        self.status = json.loads((data_dir / "status.json").read_text(encoding="utf-8"))
        self.customers = json.loads((data_dir / "customers.json").read_text(encoding="utf-8"))

    def call(self, name: str, arguments: str) -> dict[str, Any]:
        try:
            args = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            return {"error": f"arguments for {name} are not JSON"}
        if name == "get_service_status":
            service = str(args.get("service", ""))
            found = self.status.get(service)
            return {"service": service, **found} if found else {"error": f"unknown service {service!r}"}
        if name == "get_customer":
            customer_id = str(args.get("customer_id", ""))
            found = self.customers.get(customer_id)
            if not found:
                return {"error": f"unknown customer {customer_id!r}"}
            return {"customer_id": customer_id, **found}
        return {"error": f"unknown tool {name!r}"}
