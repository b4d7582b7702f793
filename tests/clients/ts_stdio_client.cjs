// The TypeScript SDK's own stdio client: list the tools, call one, and let the SDK check the structured
// content against the tool's outputSchema (its Client validates with Ajv and throws on a mismatch).
// Usage: node ts_stdio_client.cjs SDK_PREFIX COMMAND [ARGS...]; prints one JSON line; exit 1 on any failure.
const path = require("node:path");
const { createRequire } = require("node:module");

async function main() {
  const [prefix, command, ...args] = process.argv.slice(2);
  const sdk = createRequire(path.join(prefix, "package.json"));
  const { Client } = sdk("@modelcontextprotocol/sdk/client/index.js");
  const { StdioClientTransport } = sdk("@modelcontextprotocol/sdk/client/stdio.js");
  const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
  const client = new Client({ name: "ts-sdk-check", version: "1.0.0" });
  await client.connect(transport);
  const { tools } = await client.listTools();
  const result = await client.callTool({ name: "get_objects_summary", arguments: {} });
  const schema = tools.find((tool) => tool.name === "get_objects_summary").outputSchema;
  console.log(JSON.stringify({
    tools: tools.map((tool) => tool.name),
    hasOutputSchema: Boolean(schema),
    isError: Boolean(result.isError),
    sceneName: result.structuredContent && result.structuredContent.scene_name,
  }));
  await client.close();
}

main().catch((error) => {
  console.error(String(error && error.stack || error));
  process.exit(1);
});
