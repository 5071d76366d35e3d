#!/usr/bin/env bash
# A pi-ext/1 process extension in bash (needs jq; the protocol:
# docs/extensions.md): blocks `rm -rf` in bash, tags `echo` commands,
# redacts what `read` returns, registers a tool `shout` and a command
# `/note`.
set -u
# Records go to the pipe pi-run opens as fd 3 (stdout with an older pi-run).
send() { printf '%s\n' "$1" >&"${PI_EXT_RECORDS_FD:-1}"; }

read -r hello
path=$(jq -r '.load[0].path' <<<"$hello")
send "$(jq -nc --arg p "$path" '{type:"register",protocol:1,extensions:[{ext:0,path:$p,
  tools:[{name:"shout",description:"Upper-case a text.",promptSnippet:"Upper-case a text",
          parameters:{type:"object",properties:{text:{type:"string"}},required:["text"]}}],
  commands:[{name:"note",description:"Record a note in the session"}],
  events:["tool_call","tool_result"]}]}')"

while read -r line; do
  type=$(jq -r '.type' <<<"$line")
  id=$(jq -c '.id' <<<"$line")
  case $type in
    event)
      result=$(jq -c '.event as $e
        | if $e.type == "tool_call" and $e.toolName == "bash" then
            ($e.input.command // "") as $c
            | if ($c | contains("rm -rf")) then {block: true, reason: "guard.sh: rm -rf is not allowed"}
              elif ($c | startswith("echo ")) then {input: ($e.input + {command: ($c + " checked-by-guard")})}
              else null end
          elif $e.type == "tool_result" and $e.toolName == "read" then
            {content: [{type: "text", text: "[redacted by guard.sh]"}]}
          else null end' <<<"$line")
      if [ "$(jq -r '.event.type' <<<"$line")" = command ]; then
        send "$(jq -c '{type:"call",id:"c1",method:"appendEntry",params:{customType:"note",data:{text:.event.args}}}' <<<"$line")"
      fi
      send "{\"type\":\"result\",\"id\":$id,\"result\":$result}" ;;
    execute)
      send "$(jq -c '{type:"result",id:.id,result:{content:[{type:"text",text:(.params.text|ascii_upcase)}]}}' <<<"$line")" ;;
    bye) exit 0 ;;
  esac
done
