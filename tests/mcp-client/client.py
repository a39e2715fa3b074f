"""An MCP client nobody at Labfy wrote — the official Python SDK — drives
`labfy mcp` over stdio as a desktop agent would (SPEC L5): it lists the
tools, calls a read tool and `research.prepare`, which waits for the analyst.

    client.py LABFY_BIN RUNTIME_DIR INVESTIGATION ENTITY
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def fail(why):
    print(f"mcp-client: FAILED: {why}", file=sys.stderr)
    sys.exit(1)


async def main(labfy, run, inv, entity):
    server = StdioServerParameters(command=labfy, args=["mcp", "--investigation", inv, "--runtime-dir", run])
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            print(f"mcp-client: connected to {init.server_info.name}, protocol {init.protocol_version}", file=sys.stderr)
            tools = {t.name: t for t in (await session.list_tools()).tools}
            for name in ("graph.get_node", "research.prepare", "investigation.search"):
                if name not in tools:
                    fail(f"{name} not listed: {sorted(tools)}")
            node = tools["graph.get_node"]
            if not (node.annotations and node.annotations.read_only_hint):
                fail(f"graph.get_node is not read-only: {node.annotations}")
            if node.input_schema.get("required") != ["node_id"]:
                fail(f"graph.get_node's input schema: {node.input_schema}")
            read_result = await session.call_tool("graph.get_node", {"node_id": entity})
            if read_result.is_error or (read_result.structured_content or {}).get("status") != "COMPLETED":
                fail(f"the read tool: {read_result}")
            text = read_result.content[0].text
            if json.loads(text)["tool_id"] != "graph.get_node":
                fail(f"the read tool's text: {text[:200]}")
            prepared = await session.call_tool(
                "research.prepare",
                {"selection_ids": [entity], "question": "Qui contrôle cette société ?", "exclusions": []},
            )
            status = (prepared.structured_content or {}).get("status")
            if prepared.is_error or status != "AUTHORIZATION_REQUIRED":
                fail(f"research.prepare: {prepared}")
            if not prepared.content[0].text.startswith("Waiting for the analyst"):
                fail(f"research.prepare's text: {prepared.content[0].text}")
            print(f"mcp-client: {len(tools)} tools listed; graph.get_node answered; research.prepare waits for the analyst", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
