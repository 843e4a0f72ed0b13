"""A small shop as an MCP server, for the tests: items with a price and a stock, read and changed by its tools.

Built with the official SDK's high-level server. Run as a script: over stdio (no arguments), or over streamable
HTTP with `--http PORT` (one process, so its state lasts across sessions: `reset_store` puts it back).
"""

import copy
import socket
import subprocess
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

SCRIPT = Path(__file__).resolve()
INITIAL = {
    "I1": {"name": "Desk lamp", "price": 30, "stock": 4},
    "I2": {"name": "Office chair", "price": 120, "stock": 0},
}
READ = ToolAnnotations(readOnlyHint=True)

server = MCPServer("test-store", log_level="WARNING")
items = copy.deepcopy(INITIAL)


@server.tool(annotations=READ)
def get_item(item_id: str) -> dict:
    """Look up an item by its id."""
    if item_id not in items:
        raise ToolError(f"no item {item_id}")
    return {"item_id": item_id, **items[item_id]}


@server.tool(name="getStockLevel", annotations=READ)
def get_stock_level(item_id: str) -> dict:
    """How many of an item are in stock."""
    return {"item_id": item_id, "stock": items.get(item_id, {}).get("stock", 0)}


@server.tool()
def update_price(item_id: str, price: int) -> dict:
    """Set an item's price."""
    if item_id not in items:
        raise ToolError(f"no item {item_id}")
    items[item_id]["price"] = price
    return {"item_id": item_id, **items[item_id]}


@server.tool()
def buy_item(item_id: str, quantity: int = 1) -> dict:
    """Buy some of an item: the stock goes down."""
    item = items.get(item_id)
    if item is None or item["stock"] < quantity:
        raise ToolError(f"not enough {item_id} in stock")
    item["stock"] -= quantity
    return {"item_id": item_id, "bought": quantity, "stock": item["stock"]}


@server.tool()
def reset_store() -> str:
    """Put every item back as it was."""
    items.clear()
    items.update(copy.deepcopy(INITIAL))
    return "reset"


def stdio_command() -> str:
    return f"{sys.executable} {SCRIPT}"


class HttpStore:
    """The store served over streamable HTTP on a free loopback port, in a process of its own."""

    def __init__(self):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.proc = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> "HttpStore":
        self.proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), "--http", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("the MCP store did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        server.run("streamable-http", port=int(sys.argv[2]))
    else:
        server.run()
