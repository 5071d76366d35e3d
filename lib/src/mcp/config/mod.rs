//! `mcp.json` as pi 1.6.0 reads it: `<agentDir>/mcp.json`, then the
//! project's `.pi/mcp.json` only when the project is trusted. Every problem
//! is one line `<path>: <message>` with pi's wording; a bad entry is skipped
//! and the others still connect.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

mod oauth;

use oauth::oauth_field;
pub use oauth::{Grant, Idp, OAuth, Registration};

use super::urls::{is_secure as secure_url, SECURE_URL};

/// How a server's tools reach the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Exposure {
    /// Never reachable.
    Hidden,
    /// Callable only from codemode scripts (pi's default).
    Codemode,
    /// Declared once `tool_search` loads it.
    Deferred,
    /// Declared to the model like a built-in.
    Direct,
}

impl Exposure {
    fn parse(s: &str) -> Option<Exposure> {
        Some(match s {
            "codemode" | "codemode-deferred" => Exposure::Codemode,
            "deferred" => Exposure::Deferred,
            "direct" => Exposure::Direct,
            "hidden" => Exposure::Hidden,
            _ => return None,
        })
    }

    /// The word pi uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Exposure::Codemode => "codemode",
            Exposure::Deferred => "deferred",
            Exposure::Direct => "direct",
            Exposure::Hidden => "hidden",
        }
    }
}

const EXPOSURES: &str = r#""codemode", "deferred", "direct", "hidden""#;

/// How to reach a server.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A child process speaking JSON-RPC lines on stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        /// Already resolved against the session cwd (`~/` expanded).
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
        /// The `oauth` fields (all optional).
        oauth: Box<OAuth>,
        /// `auth.provider`: the model provider whose `auth.json` credential
        /// is sent as the bearer token instead of this server's own OAuth
        /// tokens (global file only; https or loopback http).
        auth_provider: Option<String>,
    },
}

impl Transport {
    /// `stdio` or `http`.
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }
}

/// One valid server entry after the global/project merge.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    /// The file the entry came from (the project file for an override).
    pub source: PathBuf,
    pub enabled: bool,
    pub description: Option<String>,
    /// Per-request timeout (pi's default 60 s; progress resets it).
    pub timeout: Duration,
    pub exposure: Exposure,
    /// Tool name or `*` pattern → exposure, in file order.
    pub tool_exposure: Vec<(String, Exposure)>,
    pub transport: Transport,
    /// Ours (pi 1.6.0 ignores the key and offers no elicitation): how a
    /// server's `elicitation/create` is answered.
    pub elicitation: Elicitation,
}

/// The entry's `elicitation` field (ours; pi 1.6.0 ignores the key).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Elicitation {
    /// pi's behaviour: the capability is not declared and a request is
    /// answered "Method not found".
    #[default]
    None,
    /// `"defaults"`: form elicitation is declared; a request is accepted
    /// with the schema's own defaults when every required field has one,
    /// else declined (`super::elicit`).
    Defaults,
}

impl ServerConfig {
    /// A tool's exposure: an exact `toolExposure` name wins, then the first
    /// matching pattern, then the server's exposure.
    pub fn exposure_of(&self, tool: &str) -> Exposure {
        if let Some((_, e)) = self.tool_exposure.iter().find(|(k, _)| k == tool) {
            return *e;
        }
        self.tool_exposure
            .iter()
            .find(|(k, _)| k.contains('*') && crate::tools::select::pattern_matches(k, tool))
            .map(|(_, e)| *e)
            .unwrap_or(self.exposure)
    }

    /// Every exposure the config names for this server.
    pub fn exposures(&self) -> Vec<Exposure> {
        let mut v = vec![self.exposure];
        v.extend(self.tool_exposure.iter().map(|(_, e)| *e));
        v
    }

    /// Whether any of its tools may be declared directly (the first
    /// request waits for such servers).
    pub fn has_direct(&self) -> bool {
        self.exposures().contains(&Exposure::Direct)
    }

    /// `mcp__<name with - as _>`.
    pub fn namespace(&self) -> String {
        super::naming::namespace(&self.name)
    }
}

/// One `mcp.json` file as found.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigFile {
    pub path: PathBuf,
    /// The project file.
    pub project: bool,
    /// Read (false: the project is not trusted, so it was skipped).
    pub read: bool,
}

/// The merged configuration of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpConfig {
    /// Valid entries, global order first, then new project entries.
    pub servers: Vec<ServerConfig>,
    /// `<path>: <message>` lines, one per problem.
    pub errors: Vec<String>,
    /// The files that exist.
    pub files: Vec<ConfigFile>,
    pub auto_enable_codemode: Option<bool>,
    /// `codemode.*` of settings.json (how the codemode tool presents the
    /// other tools).
    pub codemode: crate::codemode::Settings,
    /// The agent dir it was read from (its `mcp-auth.json` holds the OAuth
    /// tokens); `None` for a config built in memory.
    pub agent_dir: Option<PathBuf>,
}

/// Reads `<agent_dir>/mcp.json` and, when `trusted`, `<cwd>/.pi/mcp.json`.
pub fn load(agent_dir: &Path, cwd: &Path, trusted: bool) -> McpConfig {
    let mut out = McpConfig {
        agent_dir: Some(agent_dir.to_path_buf()),
        codemode: crate::settings::Settings::load(agent_dir, cwd, trusted)
            .map(|s| crate::codemode::Settings::from_values(&s.values))
            .unwrap_or_default(),
        ..McpConfig::default()
    };
    let global = agent_dir.join("mcp.json");
    let mut entries: Vec<ServerConfig> = Vec::new();
    if global.exists() {
        out.files.push(ConfigFile {
            path: global.clone(),
            project: false,
            read: true,
        });
        if let Some((servers, auto)) = read_file(&global, &mut out.errors) {
            out.auto_enable_codemode = auto.or(out.auto_enable_codemode);
            for (name, v) in servers {
                match parse_entry(&name, &v, &global, cwd, false) {
                    Ok(Entry::Full(s)) => push_checked(&mut entries, *s, &global, &mut out.errors),
                    Ok(Entry::Override(_)) => out.errors.push(format!(
                        "{}: server \"{name}\" needs either \"command\" (stdio) or \"url\" (streamable HTTP)",
                        global.display()
                    )),
                    Err(e) => out.errors.push(format!("{}: {e}", global.display())),
                }
            }
        }
    }
    let project = cwd.join(".pi").join("mcp.json");
    if project.exists() {
        out.files.push(ConfigFile {
            path: project.clone(),
            project: true,
            read: trusted,
        });
        if trusted {
            if let Some((servers, auto)) = read_file(&project, &mut out.errors) {
                out.auto_enable_codemode = auto.or(out.auto_enable_codemode);
                for (name, v) in servers {
                    match parse_entry(&name, &v, &project, cwd, true) {
                        Ok(Entry::Full(s)) => {
                            // The project entry replaces the global one.
                            if let Some(i) = entries.iter().position(|e| e.name == s.name) {
                                entries[i] = *s;
                            } else {
                                push_checked(&mut entries, *s, &project, &mut out.errors);
                            }
                        }
                        Ok(Entry::Override(o)) => {
                            match entries.iter_mut().find(|e| e.name == name) {
                                Some(g) => {
                                    g.source = project.clone();
                                    if let Some(en) = o.enabled {
                                        g.enabled = en;
                                    }
                                    if let Some(ex) = o.exposure {
                                        g.exposure = ex;
                                    }
                                    if let Some(te) = o.tool_exposure {
                                        g.tool_exposure = te;
                                    }
                                }
                                None => out.errors.push(format!(
                                    "{}: server \"{name}\" needs \"command\" or \"url\", or a global server to override",
                                    project.display()
                                )),
                            }
                        }
                        Err(e) => out.errors.push(format!("{}: {e}", project.display())),
                    }
                }
            }
        }
    }
    out.servers = entries;
    out
}

/// Adds `s` unless its namespace is taken by another name.
fn push_checked(
    entries: &mut Vec<ServerConfig>,
    s: ServerConfig,
    path: &Path,
    errors: &mut Vec<String>,
) {
    if let Some(other) = entries
        .iter()
        .find(|e| e.name != s.name && e.namespace() == s.namespace())
    {
        errors.push(format!(
            "{}: server \"{}\" conflicts with \"{}\"",
            path.display(),
            s.name,
            other.name
        ));
        return;
    }
    entries.push(s);
}

type FileServers = (Vec<(String, Value)>, Option<bool>);

fn read_file(path: &Path, errors: &mut Vec<String>) -> Option<FileServers> {
    let text = match crate::regular_file::read_config(path, crate::regular_file::CONFIG_CAP) {
        Ok(Some(t)) => t,
        Ok(None) => return None,
        Err(e) => {
            errors.push(format!("{}: {e}", path.display()));
            return None;
        }
    };
    let v: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            errors.push(format!("{}: {e}", path.display()));
            return None;
        }
    };
    let shape = || {
        format!(
            "{}: expected an object with an \"mcpServers\" object",
            path.display()
        )
    };
    let Value::Object(top) = v else {
        errors.push(shape());
        return None;
    };
    // VS Code's `mcp.json` keeps its servers under "servers"; pi 1.6.0 reads
    // only "mcpServers" and says nothing, so such a file starts nothing
    // without a word. Ours says which key is read (the file is still read).
    if top.contains_key("servers") {
        errors.push(format!(
            "{}: \"servers\" is not read (VS Code's shape); MCP servers go under \"mcpServers\"",
            path.display()
        ));
    }
    let servers = match top.get("mcpServers") {
        None => Vec::new(),
        Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        Some(_) => {
            errors.push(shape());
            return None;
        }
    };
    Some((
        servers,
        top.get("autoEnableCodemode").and_then(Value::as_bool),
    ))
}

struct Override {
    enabled: Option<bool>,
    exposure: Option<Exposure>,
    tool_exposure: Option<Vec<(String, Exposure)>>,
}

enum Entry {
    Full(Box<ServerConfig>),
    Override(Override),
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn string_map(
    v: Option<&Value>,
    what: &str,
    name: &str,
) -> Result<BTreeMap<String, String>, String> {
    match v {
        None => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), expand_value(s))),
                _ => Err(format!("server \"{name}\": {what}")),
            })
            .collect(),
        Some(_) => Err(format!("server \"{name}\": {what}")),
    }
}

/// `${VAR}` from the environment (unset: empty), or a whole-value
/// `!command` replaced by the command's trimmed stdout.
pub(super) fn expand_value(s: &str) -> String {
    if let Some(cmd) = s.strip_prefix('!') {
        return std::process::Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        match rest[i + 2..].find('}') {
            Some(j) => {
                let var = &rest[i + 2..i + 2 + j];
                out.push_str(&std::env::var(var).unwrap_or_default());
                rest = &rest[i + 3 + j..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

fn exposure_field(m: &Map<String, Value>, name: &str) -> Result<Option<Exposure>, String> {
    match m.get("exposure") {
        None => Ok(None),
        Some(v) => v
            .as_str()
            .and_then(Exposure::parse)
            .map(Some)
            .ok_or_else(|| format!("server \"{name}\": exposure must be one of {EXPOSURES}")),
    }
}

fn tool_exposure_field(
    m: &Map<String, Value>,
    name: &str,
) -> Result<Option<Vec<(String, Exposure)>>, String> {
    match m.get("toolExposure") {
        None => Ok(None),
        Some(Value::Object(t)) => t
            .iter()
            .map(|(k, v)| {
                v.as_str()
                    .and_then(Exposure::parse)
                    .map(|e| (k.clone(), e))
                    .ok_or_else(|| {
                        format!(
                            "server \"{name}\": toolExposure \"{k}\" must be one of {EXPOSURES}"
                        )
                    })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(format!(
            "server \"{name}\": toolExposure must map tool names to exposures"
        )),
    }
}

fn parse_entry(
    name: &str,
    v: &Value,
    _path: &Path,
    cwd: &Path,
    project: bool,
) -> Result<Entry, String> {
    if !valid_name(name) {
        return Err(format!(
            "invalid server name \"{name}\" (use letters, digits, \"_\" and \"-\")"
        ));
    }
    let Value::Object(m) = v else {
        return Err(format!("server \"{name}\" must be an object"));
    };
    let ty = m.get("type").and_then(Value::as_str);
    if ty == Some("sse") {
        return Err(format!(
            "server \"{name}\": legacy SSE transport is not supported; use the streamable HTTP URL"
        ));
    }
    let enabled = match m.get("enabled") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => return Err(format!("server \"{name}\": enabled must be a boolean")),
    };
    let exposure = exposure_field(m, name)?;
    let tool_exposure = tool_exposure_field(m, name)?;
    let has_transport =
        m.contains_key("command") || m.contains_key("url") || m.contains_key("type");
    if project && m.contains_key("auth") {
        return Err(format!(
            "server \"{name}\": auth is only allowed in the global mcp.json"
        ));
    }
    if !has_transport {
        if project {
            if m.keys()
                .any(|k| !matches!(k.as_str(), "enabled" | "exposure" | "toolExposure"))
            {
                return Err(format!(
                    "server \"{name}\": an override can only set enabled, exposure, toolExposure"
                ));
            }
            return Ok(Entry::Override(Override {
                enabled,
                exposure,
                tool_exposure,
            }));
        }
        return Err(format!(
            "server \"{name}\" needs either \"command\" (stdio) or \"url\" (streamable HTTP)"
        ));
    }
    let description = match m.get("description") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(format!("server \"{name}\": description must be a string")),
    };
    let timeout = match m.get("timeout") {
        None => Duration::from_secs(60),
        Some(v) => match v.as_f64() {
            Some(t) if t > 0.0 && t.is_finite() => Duration::from_secs_f64(t.min(1e9)),
            _ => {
                return Err(format!(
                    "server \"{name}\": timeout must be a positive number of seconds"
                ))
            }
        },
    };
    let oauth = oauth_field(m, name)?;
    // pi validates `auth` for every entry and uses it for HTTP only.
    let auth_provider = match m.get("auth") {
        None => None,
        Some(a) => match a.get("provider") {
            Some(Value::String(p)) if !p.is_empty() => Some(p.clone()),
            _ => {
                return Err(format!(
                    "server \"{name}\": auth.provider must be a provider name"
                ))
            }
        },
    };
    let elicitation = match m.get("elicitation") {
        None => Elicitation::None,
        Some(v) => match v.as_str() {
            Some("none") => Elicitation::None,
            Some("defaults") => Elicitation::Defaults,
            _ => {
                return Err(format!(
                    "server \"{name}\": elicitation must be \"none\" or \"defaults\""
                ))
            }
        },
    };
    let transport = match (m.get("url"), m.get("command")) {
        (Some(url), _) if matches!(ty, None | Some("http") | Some("streamable-http")) => {
            let url = url
                .as_str()
                .filter(|u| super::urls::http_url(u).is_some())
                .ok_or_else(|| format!("server \"{name}\": url must be an http or https URL"))?;
            if auth_provider.is_some() && !secure_url(url) {
                return Err(format!("server \"{name}\": auth requires {SECURE_URL}"));
            }
            Transport::Http {
                url: url.to_string(),
                headers: string_map(m.get("headers"), "headers must map names to strings", name)?,
                oauth: Box::new(oauth),
                auth_provider,
            }
        }
        (None, Some(cmd)) if matches!(ty, None | Some("stdio")) => {
            let command = match cmd {
                Value::String(s) if !s.is_empty() => s.clone(),
                _ => {
                    return Err(format!(
                        "server \"{name}\" needs either \"command\" (stdio) or \"url\" (streamable HTTP)"
                    ))
                }
            };
            let args = match m.get("args") {
                None => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|x| x.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        format!("server \"{name}\": args must be an array of strings")
                    })?,
                Some(_) => {
                    return Err(format!(
                        "server \"{name}\": args must be an array of strings"
                    ))
                }
            };
            let env = string_map(m.get("env"), "env must map names to strings", name)?;
            let dir = match m.get("cwd") {
                None => None,
                Some(Value::String(s)) => Some(cwd.join(crate::paths::expand_tilde(Path::new(s)))),
                Some(_) => return Err(format!("server \"{name}\": cwd must be a string")),
            };
            Transport::Stdio {
                command,
                args,
                env,
                cwd: dir,
            }
        }
        _ => {
            return Err(format!(
                "server \"{name}\" needs either \"command\" (stdio) or \"url\" (streamable HTTP)"
            ))
        }
    };
    Ok(Entry::Full(Box::new(ServerConfig {
        name: name.to_string(),
        source: _path.to_path_buf(),
        enabled: enabled.unwrap_or(true),
        description,
        timeout,
        exposure: exposure.unwrap_or(Exposure::Codemode),
        tool_exposure: tool_exposure.unwrap_or_default(),
        transport,
        elicitation,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `oauth` fields with pi 1.6.0's error texts (observed with `pi mcp
    /// list`); unknown keys are ignored and a good object is kept.
    #[test]
    fn oauth_fields_are_validated_like_pi() {
        let u = r#""url":"http://127.0.0.1:1/mcp""#;
        let cases = [
            (r#""x""#, "oauth must be an object"),
            (r#"{"clientId":5}"#, "oauth.clientId must be a string"),
            (r#"{"clientSecret":5}"#, "oauth.clientSecret must be a string"),
            (r#"{"callbackPort":"x"}"#, "oauth.callbackPort must be a port number"),
            (r#"{"callbackPort":70000}"#, "oauth.callbackPort must be a port number"),
            (r#"{"callbackUrl":"http://example.com/cb"}"#, "oauth.callbackUrl must be an http URI on localhost, 127.0.0.1, or [::1] without query or fragment"),
            (r#"{"callbackUrl":"http://localhost:3/cb?x=1"}"#, "oauth.callbackUrl must be an http URI on localhost, 127.0.0.1, or [::1] without query or fragment"),
            (r#"{"scope":5}"#, "oauth.scope must be a string"),
            (r#"{"clientName":5}"#, "oauth.clientName must be a non-empty string"),
            (r#"{"clientRegistration":"x"}"#, "oauth.clientRegistration must be \"auto\", \"dcr\", or \"cimd\""),
            // Ours (pi has no such fields).
            (r#"{"grantType":"password"}"#, "oauth.grantType must be \"authorization_code\", \"client_credentials\", or \"enterprise\""),
            (r#"{"grantType":"enterprise","clientId":"c"}"#, "oauth.grantType \"enterprise\" needs oauth.idp"),
            (r#"{"idp":{"tokenEndpoint":"http://idp.example/t","clientId":"i","idToken":"t"}}"#, "oauth.idp.tokenEndpoint must be an https URL, or http on localhost, 127.0.0.1, or [::1]"),
            (r#"{"idp":{"tokenEndpoint":"https://idp.example/t","clientId":"i"}}"#, "oauth.idp.idToken must be a non-empty string"),
            (r#"{"grantType":"client_credentials"}"#, "oauth.grantType \"client_credentials\" needs oauth.clientId"),
            (r#"{"privateKey":1}"#, "oauth.privateKey must be a string"),
            (r#"{"signingAlgorithm":"HS256"}"#, "oauth.signingAlgorithm must be \"ES256\" or \"RS256\""),
            (r#"{"clientMetadataUrl":"http://example.com/c.json"}"#, "oauth.clientMetadataUrl must be an https URL, or http on localhost, 127.0.0.1, or [::1]"),
            (r#"{"authServerMetadataUrl":"ftp://x"}"#, "oauth.authServerMetadataUrl must be an https URL, or http on localhost, 127.0.0.1, or [::1]"),
        ];
        for (oauth, want) in cases {
            let (_t, agent, cwd) = setup(
                &format!(r#"{{"mcpServers":{{"s":{{{u},"oauth":{oauth}}}}}}}"#),
                None,
            );
            let cfg = load(&agent, &cwd, false);
            let path = agent.join("mcp.json");
            assert_eq!(
                cfg.errors,
                [format!("{}: server \"s\": {want}", path.display())],
                "{oauth}"
            );
            assert!(cfg.servers.is_empty());
        }
        let (_t, agent, cwd) = setup(
            &format!(
                r#"{{"mcpServers":{{"s":{{{u},"oauth":{{"clientId":"id","clientSecret":"${{PI_TEST_NO_SUCH_VAR}}x","callbackPort":8123,"scope":"a b","clientRegistration":"dcr","grantType":"client_credentials","clientMetadataUrl":"https://c.example/m.json","bogus":1}}}}}}}}"#
            ),
            None,
        );
        let cfg = load(&agent, &cwd, false);
        assert!(cfg.errors.is_empty(), "{:?}", cfg.errors);
        let Transport::Http { oauth, .. } = &cfg.servers[0].transport else {
            panic!("http")
        };
        assert_eq!(oauth.client_id.as_deref(), Some("id"));
        assert_eq!(oauth.client_secret.as_deref(), Some("x"));
        assert_eq!(oauth.callback_port, Some(8123));
        assert_eq!(oauth.scope.as_deref(), Some("a b"));
        assert_eq!(oauth.client_registration, Registration::Dcr);
        assert_eq!(oauth.grant, Grant::ClientCredentials);
        assert_eq!(
            oauth.client_metadata_url.as_deref(),
            Some("https://c.example/m.json")
        );
    }

    fn setup(global: &str, project: Option<&str>) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let agent = t.path().join("agent");
        let cwd = t.path().join("proj");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::create_dir_all(cwd.join(".pi")).unwrap();
        std::fs::write(agent.join("mcp.json"), global).unwrap();
        if let Some(p) = project {
            std::fs::write(cwd.join(".pi/mcp.json"), p).unwrap();
        }
        (t, agent, cwd)
    }

    /// `auth` with pi 1.6.0's error texts (observed with `pi mcp list`): a
    /// non-empty `provider` string (any name; extra keys ignored), and for
    /// HTTP an https or loopback URL; a stdio entry keeps nothing of it.
    #[test]
    fn auth_provider_is_validated_like_pi() {
        let (_t, agent, cwd) = setup(
            r#"{"mcpServers":{
               "a1":{"url":"http://127.0.0.1:9/mcp","auth":"x"},
               "a2":{"url":"http://127.0.0.1:9/mcp","auth":{}},
               "a3":{"url":"http://127.0.0.1:9/mcp","auth":{"provider":5}},
               "a4":{"url":"http://127.0.0.1:9/mcp","auth":{"provider":""}},
               "a5":{"url":"http://example.com/mcp","auth":{"provider":"anthropic"}},
               "a6":{"command":"x","auth":{"provider":"anthropic"}},
               "a7":{"url":"https://example.com/mcp","auth":{"provider":"anthropic","extra":1}},
               "a8":{"url":"http://localhost:9/mcp","auth":{"provider":"no such"}},
               "b1":{"url":"http://127.0.0.1:9/mcp","auth":null}}}"#,
            None,
        );
        let c = load(&agent, &cwd, false);
        let got: Vec<(&str, Option<&str>)> = c
            .servers
            .iter()
            .map(|s| match &s.transport {
                Transport::Http { auth_provider, .. } => {
                    (s.name.as_str(), auth_provider.as_deref())
                }
                Transport::Stdio { .. } => (s.name.as_str(), None),
            })
            .collect();
        assert_eq!(
            got,
            [
                ("a6", None),
                ("a7", Some("anthropic")),
                ("a8", Some("no such"))
            ]
        );
        let g = agent.join("mcp.json").display().to_string();
        let name = "auth.provider must be a provider name";
        let url = "auth requires an https URL, or http on localhost, 127.0.0.1, or [::1]";
        let want: Vec<String> = [
            ("a1", name),
            ("a2", name),
            ("a3", name),
            ("a4", name),
            ("a5", url),
            ("b1", name),
        ]
        .iter()
        .map(|(n, m)| format!("{g}: server \"{n}\": {m}"))
        .collect();
        assert_eq!(c.errors, want);
    }

    /// `elicitation` (ours): absent or `"none"` is pi's behaviour,
    /// `"defaults"` opts in, anything else skips the entry with a line
    /// naming the file and the server.
    #[test]
    fn elicitation_opt_in_is_validated() {
        let (_t, agent, cwd) = setup(
            r#"{"mcpServers":{"a":{"command":"x"},"b":{"command":"x","elicitation":"none"},
               "c":{"url":"http://127.0.0.1:1/mcp","elicitation":"defaults"},
               "d":{"command":"x","elicitation":true},"e":{"command":"x","elicitation":"form"}}}"#,
            None,
        );
        let c = load(&agent, &cwd, false);
        let got: Vec<(&str, Elicitation)> = c
            .servers
            .iter()
            .map(|s| (s.name.as_str(), s.elicitation))
            .collect();
        assert_eq!(
            got,
            [
                ("a", Elicitation::None),
                ("b", Elicitation::None),
                ("c", Elicitation::Defaults)
            ]
        );
        let g = agent.join("mcp.json").display().to_string();
        assert_eq!(
            c.errors,
            ["d", "e"].map(|n| format!(
                "{g}: server \"{n}\": elicitation must be \"none\" or \"defaults\""
            ))
        );
    }

    #[test]
    fn bad_entries_are_reported_with_file_and_name_and_skipped() {
        let (_t, agent, cwd) = setup(
            r#"{"mcpServers":{
              "ok":{"command":"echo"},
              "bad name":{"command":"x"},
              "s":{"type":"sse","url":"http://x"},
              "n":{"enabled":true},
              "t":{"command":"x","timeout":0},
              "e":{"command":"x","exposure":"loud"},
              "a":{"command":"x","args":[1]},
              "u":{"url":"ftp://x"},
              "my-srv":{"command":"x"},
              "my_srv":{"command":"y"}
            }}"#,
            None,
        );
        let c = load(&agent, &cwd, false);
        let g = agent.join("mcp.json").display().to_string();
        assert_eq!(
            c.servers
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>(),
            ["ok", "my-srv"]
        );
        let want = [
            r#"invalid server name "bad name" (use letters, digits, "_" and "-")"#,
            r#"server "s": legacy SSE transport is not supported; use the streamable HTTP URL"#,
            r#"server "n" needs either "command" (stdio) or "url" (streamable HTTP)"#,
            r#"server "t": timeout must be a positive number of seconds"#,
            r#"server "e": exposure must be one of "codemode", "deferred", "direct", "hidden""#,
            r#"server "a": args must be an array of strings"#,
            r#"server "u": url must be an http or https URL"#,
            r#"server "my_srv" conflicts with "my-srv""#,
        ];
        let want: Vec<String> = want.iter().map(|w| format!("{g}: {w}")).collect();
        assert_eq!(c.errors, want);
    }

    #[test]
    fn project_file_only_when_trusted_and_overrides_limited() {
        let (_t, agent, cwd) = setup(
            r#"{"mcpServers":{"g":{"command":"a","exposure":"direct"}}}"#,
            Some(
                r#"{"mcpServers":{"g":{"exposure":"hidden","toolExposure":{"x*":"direct"}},
                   "p":{"command":"b"},"lonely":{"enabled":false},"bad":{"enabled":false,"args":[]},
                   "h":{"url":"https://x","auth":{"provider":"a"}}}}"#,
            ),
        );
        let untrusted = load(&agent, &cwd, false);
        assert_eq!(untrusted.servers.len(), 1);
        assert_eq!(untrusted.servers[0].exposure, Exposure::Direct);
        assert!(untrusted.errors.is_empty());
        assert!(!untrusted.files[1].read);

        let c = load(&agent, &cwd, true);
        let p = cwd.join(".pi/mcp.json").display().to_string();
        assert_eq!(
            c.servers
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>(),
            ["g", "p"]
        );
        let g = &c.servers[0];
        assert_eq!(g.exposure, Exposure::Hidden);
        assert_eq!(g.exposure_of("xyz"), Exposure::Direct);
        assert_eq!(g.exposure_of("abc"), Exposure::Hidden);
        assert_eq!(
            g.transport,
            Transport::Stdio {
                command: "a".into(),
                args: vec![],
                env: BTreeMap::new(),
                cwd: None
            }
        );
        assert_eq!(
            c.errors,
            [
                format!("{p}: server \"lonely\" needs \"command\" or \"url\", or a global server to override"),
                format!("{p}: server \"bad\": an override can only set enabled, exposure, toolExposure"),
                format!("{p}: server \"h\": auth is only allowed in the global mcp.json"),
            ]
        );
    }

    #[test]
    fn whole_file_errors_name_the_file() {
        let (_t, agent, cwd) = setup(r#"{"mcpServers":[]}"#, None);
        let c = load(&agent, &cwd, true);
        assert_eq!(
            c.errors,
            [format!(
                "{}: expected an object with an \"mcpServers\" object",
                agent.join("mcp.json").display()
            )]
        );
        std::fs::write(agent.join("mcp.json"), "{").unwrap();
        let c = load(&agent, &cwd, true);
        assert_eq!(c.errors.len(), 1);
        assert!(c.errors[0].starts_with(&format!("{}: ", agent.join("mcp.json").display())));
        // VS Code's shape: said, and the file's "mcpServers" still read.
        std::fs::write(
            agent.join("mcp.json"),
            r#"{"servers":{"a":{"command":"x"}},"mcpServers":{"b":{"command":"y"}}}"#,
        )
        .unwrap();
        let c = load(&agent, &cwd, true);
        assert_eq!(
            c.errors,
            [format!(
                "{}: \"servers\" is not read (VS Code's shape); MCP servers go under \"mcpServers\"",
                agent.join("mcp.json").display()
            )]
        );
        assert_eq!(c.servers.len(), 1);
        assert_eq!(c.servers[0].name, "b");
    }

    #[test]
    fn env_values_expand_variables_and_commands_and_cwd_resolves() {
        std::env::set_var("PI_MCP_TEST_VAR", "v1");
        let (_t, agent, cwd) = setup(
            r#"{"mcpServers":{"s":{"command":"x","cwd":"sub","env":{"A":"a-${PI_MCP_TEST_VAR}-b","B":"!echo hi"}}}}"#,
            None,
        );
        let c = load(&agent, &cwd, false);
        let Transport::Stdio { env, cwd: dir, .. } = &c.servers[0].transport else {
            panic!("stdio expected")
        };
        assert_eq!(env["A"], "a-v1-b");
        assert_eq!(env["B"], "hi");
        assert_eq!(dir.as_deref(), Some(cwd.join("sub").as_path()));
        assert_eq!(c.servers[0].exposure, Exposure::Codemode);
        assert_eq!(c.servers[0].timeout, Duration::from_secs(60));
    }
}
