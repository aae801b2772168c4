#!/usr/bin/env bash
# A real episode end to end, in a throwaway git repository: init, a Claude Code SessionStart payload,
# a PreCompact, a SessionEnd; then what landed on disk.
set -euo pipefail
repo=$(mktemp -d "${TMPDIR:-/tmp}/majordomus-demo.XXXXXX")
trap 'rm -rf "$repo"' EXIT
cd "$repo"
git init -q && git -c user.name=demo -c user.email=demo@example.invalid commit -q --allow-empty -m "first commit"
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

say majordomus init
majordomus init
git add -A && git -c user.name=demo -c user.email=demo@example.invalid commit -q -m "majordomus layer"

say "SessionStart (Claude Code payload) | majordomus capture session --provider claude-code --event start"
printf '%s' '{"session_id":"demo-7f3c","transcript_path":"/tmp/t.jsonl","cwd":"'"$repo"'","hook_event_name":"SessionStart","source":"startup"}' \
  | majordomus capture session --provider claude-code --event start

say "UserPromptSubmit | majordomus capture prompt --provider claude-code   (the key is redacted before any byte lands)"
printf '%s' '{"session_id":"demo-7f3c","prompt_id":"p-1","hook_event_name":"UserPromptSubmit","prompt":"add a notes file; the staging key is sk-ant-api03-DEMOxDEMOxDEMOxDEMOxDEMOxDEMOxDEMOx1234 if you need it"}' \
  | majordomus capture prompt --provider claude-code

echo "work happens" > notes.txt
say "PreCompact | majordomus capture session --provider claude-code --event compact"
printf '%s' '{"session_id":"demo-7f3c","hook_event_name":"PreCompact","trigger":"auto","custom_instructions":""}' \
  | majordomus capture session --provider claude-code --event compact

say "SessionEnd reason prompt_input_exit | majordomus capture session --provider claude-code --event end"
printf '%s' '{"session_id":"demo-7f3c","hook_event_name":"SessionEnd","reason":"prompt_input_exit"}' \
  | majordomus capture session --provider claude-code --event end

say "cat .ai/repo/sessions/2*.md   (the record that landed)"
cat .ai/repo/sessions/2*.md
say "cat .ai/local/state/ledger.jsonl"
cat .ai/local/state/ledger.jsonl

say "ls -l .ai/local/prompts   (0700 directory, 0600 files)"
ls -la .ai/local/prompts
say "cat .ai/local/prompts/*.json"
cat .ai/local/prompts/*.json
say "majordomus capture reconcile --dry-run"
majordomus capture reconcile --dry-run

say "an MCP client with no hooks: four frames into majordomus-mcp (SPEC 9)"
printf '%s\n' \
'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"anything","version":"0"}}}' \
'{"jsonrpc":"2.0","method":"notifications/initialized"}' \
'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"majordomus_session_attach","arguments":{"external_id":"my-thread"}}}' \
'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"majordomus_session_detach","arguments":{}}}' \
  | majordomus-mcp --http-port 0 2>/dev/null \
  | python3 -c 'import json,sys
for line in sys.stdin:
    ep = json.loads(line).get("result", {}).get("structuredContent", {}).get("episode")
    if ep: print(ep["repository"])'

say "majordomus capture status"
majordomus capture status || true
say "majordomus doctor"
majordomus doctor || true
