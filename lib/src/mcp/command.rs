//! The `/mcp` command outside the TUI, as pi 1.6.0's built-in `mcp`
//! extension answers it in RPC mode (and, without a UI, in print and JSON
//! mode): the status ([`super::status`]), `reconnect`, `logout` and
//! `login`, each for a named server or, without one, the only candidate or
//! the one the user picks (`select` titled `MCP server`) among the enabled
//! servers (for `reconnect`; those not connected when there are any) or
//! the OAuth ones (HTTP without an `Authorization` header, for `login` and
//! `logout`; those needing sign-in when there are any). A reconnect or a
//! sign-in reconnects through the manager and the agent's MCP tools follow
//! the new connection ([`refresh_tools`]), so the next request records the
//! tool change as pi does (`toolsAdded`/`toolsRemoved`). The sign-in is the
//! OAuth flow of [`super::auth`]: the authorization URL is notified (and
//! handed to the browser), an `input` dialog waits for it and accepts the
//! URL the browser was redirected to, pasted, when the loopback callback
//! cannot be reached; cancelling the dialog cancels the sign-in. Without a
//! UI, sign-in does nothing and the other actions happen silently, as in
//! pi.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::status::{self, McpCommand};
use super::{auth, config::Transport, Mcp, Server, State};
use crate::agent::hooks::BoxFuture;
use crate::tools::Tool;

/// How long a sign-in may take in all (the user signs in in a browser).
pub const LOGIN_LIMIT: Duration = Duration::from_secs(300);

/// The title of the server choice.
pub const SELECT_TITLE: &str = "MCP server";

/// Where the command asks and tells: the RPC client's UI.
pub trait Ui: Send + Sync {
    /// A notice (`info`, `warning` or `error`).
    fn notify(&self, message: &str, kind: &str);
    /// A choice; `None` when cancelled.
    fn select(&self, title: &str, options: &[String]) -> BoxFuture<'static, Option<String>>;
    /// A line of text; `None` when cancelled.
    fn input(&self, title: &str, placeholder: &str) -> BoxFuture<'static, Option<String>>;
}

/// What the command works on.
pub struct Context<'a> {
    /// The run's servers (`None`: none started).
    pub mcp: Option<&'a Arc<Mcp>>,
    /// Where `mcp.json` and `mcp-auth.json` are.
    pub agent_dir: &'a Path,
    /// `None` in print and JSON mode: nothing is shown or asked.
    pub ui: Option<&'a dyn Ui>,
    /// Which of the servers' direct tools the run's tool selection admits
    /// (`--tools`, `defaultTools`, a pinned set); `None`: all.
    pub select: Option<&'a Select>,
}

/// See [`Context::select`].
pub type Select = dyn Fn(&[Arc<dyn Tool>]) -> Vec<Arc<dyn Tool>> + Sync;

impl Context<'_> {
    fn notify(&self, message: &str, kind: &str) {
        if let Some(ui) = self.ui {
            ui.notify(message, kind);
        }
    }

    async fn choose(&self, names: Vec<String>) -> Option<String> {
        match names.len() {
            0 => None,
            1 => names.into_iter().next(),
            _ => self.ui?.select(SELECT_TITLE, &names).await,
        }
    }
}

fn no_such(name: &str) -> String {
    format!("No MCP server named \"{name}\".")
}

const NO_RECONNECT: &str = "No enabled MCP server to reconnect.";
const NO_OAUTH: &str =
    "No enabled MCP server uses OAuth. Only HTTP servers without an Authorization header do.";

/// Whether `s` can sign in with OAuth: enabled, HTTP, no `Authorization`
/// header of its own.
fn uses_oauth(s: &Server) -> bool {
    s.cfg.enabled
        && matches!(&s.cfg.transport, Transport::Http { headers, .. }
            if !headers.keys().any(|k| k.eq_ignore_ascii_case("authorization")))
}

/// The server an action is for: the one named (or a notice saying why it
/// cannot be), else the candidates narrowed by `prefer` when any matches,
/// the only one or the user's choice. `none` is the notice when nothing
/// qualifies.
async fn target(
    ctx: &Context<'_>,
    named: Option<&str>,
    ok: &dyn Fn(&Server) -> bool,
    prefer: &dyn Fn(&State) -> bool,
    none: &str,
) -> Option<Arc<Server>> {
    let servers: &[Arc<Server>] = ctx.mcp.map_or(&[], |m| &m.servers);
    if let Some(name) = named {
        let Some(s) = servers.iter().find(|s| s.cfg.name == name) else {
            ctx.notify(&no_such(name), "error");
            return None;
        };
        if !ok(s) {
            ctx.notify(none, "error");
            return None;
        }
        return Some(Arc::clone(s));
    }
    let mut candidates: Vec<&Arc<Server>> = servers.iter().filter(|s| ok(s)).collect();
    if candidates.is_empty() {
        ctx.notify(none, "info");
        return None;
    }
    if candidates.iter().any(|s| prefer(&s.state())) {
        candidates.retain(|s| prefer(&s.state()));
    }
    let name = ctx
        .choose(candidates.iter().map(|s| s.cfg.name.clone()).collect())
        .await?;
    candidates
        .into_iter()
        .find(|s| s.cfg.name == name)
        .map(Arc::clone)
}

/// Runs `/mcp …` and keeps `tools` (the agent's active tools) in step with
/// the servers: a server's tools that went away are dropped, changed ones
/// replaced in place, new ones appended.
pub async fn run(ctx: &Context<'_>, cmd: McpCommand, tools: &mut Vec<Arc<dyn Tool>>) {
    let before: Vec<String> = ctx.mcp.map_or_else(Vec::new, |m| {
        m.direct_tools()
            .iter()
            .map(|t| t.name().into_owned())
            .collect()
    });
    if perform(ctx, cmd).await {
        if let Some(m) = ctx.mcp {
            let all = m.direct_tools();
            let now = match ctx.select {
                Some(f) => f(&all),
                None => all,
            };
            refresh_tools(tools, &before, now);
        }
    }
}

/// The action; `true` when a server's connection changed.
async fn perform(ctx: &Context<'_>, cmd: McpCommand) -> bool {
    match cmd {
        McpCommand::Status => {
            if let Some(m) = ctx.mcp {
                status::settle(m).await;
            }
            ctx.notify(
                &status::report(ctx.mcp.map(|m| m.as_ref()), ctx.agent_dir),
                "info",
            );
            false
        }
        McpCommand::Usage => {
            ctx.notify(status::USAGE, "warning");
            false
        }
        McpCommand::Reconnect(named) => {
            let not_connected = |st: &State| !matches!(st, State::Connected(_));
            let Some(s) = target(
                ctx,
                named.as_deref(),
                &|s| s.cfg.enabled,
                &not_connected,
                NO_RECONNECT,
            )
            .await
            else {
                return false;
            };
            let Some(m) = ctx.mcp else { return false };
            let st = m.reconnect(&s).await;
            connected_notice(ctx, &s, &st, |k| {
                format!(
                    "Reconnected to MCP server \"{}\" (connected · {k} tools).",
                    s.cfg.name
                )
            });
            true
        }
        McpCommand::Logout(named) => {
            let needs = |st: &State| matches!(st, State::NeedsAuth(_));
            let Some(s) = target(ctx, named.as_deref(), &uses_oauth, &needs, NO_OAUTH).await else {
                return false;
            };
            logout(ctx, &s).await
        }
        McpCommand::Login(named) => {
            // pi signs in only where it can ask.
            let Some(ui) = ctx.ui else { return false };
            let needs = |st: &State| matches!(st, State::NeedsAuth(_));
            let Some(s) = target(ctx, named.as_deref(), &uses_oauth, &needs, NO_OAUTH).await else {
                return false;
            };
            login(ctx, ui, &s).await
        }
    }
}

/// After a (re)connection: `done(<number of tools>)`, or why it did not
/// connect.
fn connected_notice(ctx: &Context<'_>, s: &Server, st: &State, done: impl Fn(usize) -> String) {
    let name = &s.cfg.name;
    match st {
        State::Connected(c) => ctx.notify(&done(c.tools.len()), "info"),
        State::Failed(e) => ctx.notify(
            &format!("MCP server \"{name}\" failed to connect: {e}"),
            "error",
        ),
        State::NeedsAuth(_) => ctx.notify(
            &format!("MCP server \"{name}\" requires sign-in. Run /mcp to sign in."),
            "error",
        ),
        State::Connecting | State::Disabled => {}
    }
}

/// Drops the server's tokens from `mcp-auth.json` (other records kept) and,
/// when there were some, closes its connection: it needs sign-in again.
async fn logout(ctx: &Context<'_>, s: &Server) -> bool {
    let name = &s.cfg.name;
    let Transport::Http { url, .. } = &s.cfg.transport else {
        return false;
    };
    let store = auth::Store::new(ctx.agent_dir);
    match store.remove(&auth::Store::key(&s.cfg, url)) {
        Ok(true) => {
            ctx.notify(&format!("Signed out of MCP server \"{name}\"."), "info");
            if let Some(m) = ctx.mcp {
                let why = format!("signed out; sign in with /mcp login {name}");
                m.disconnect(s, State::NeedsAuth(why)).await;
            }
            true
        }
        Ok(false) => {
            ctx.notify(
                &format!("No stored credentials for MCP server \"{name}\"."),
                "info",
            );
            false
        }
        Err(e) => {
            ctx.notify(&e, "error");
            false
        }
    }
}

/// The sign-in: the URL notified and opened, the `input` dialog waiting
/// alongside the loopback callback; on success the server reconnects.
async fn login(ctx: &Context<'_>, ui: &dyn Ui, s: &Arc<Server>) -> bool {
    let name = s.cfg.name.clone();
    let store = auth::Store::new(ctx.agent_dir);
    let (tx, rx) = tokio::sync::oneshot::channel::<String>();
    let tx = std::sync::Mutex::new(Some(tx));
    let opener = |url: &str| {
        ui.notify(
            &format!("Sign in to MCP server \"{name}\" in your browser:\n{url}"),
            "info",
        );
        auth::open_browser(url);
        if let Some(tx) = tx.lock().ok().and_then(|mut t| t.take()) {
            let _ = tx.send(url.to_string());
        }
    };
    let signin = auth::login(&s.cfg, &store, LOGIN_LIMIT, &opener);
    let title = format!(
        "Waiting for sign-in to \"{name}\". If the browser cannot reach this machine, paste the URL it was redirected to."
    );
    // Ends only when the user cancels; a pasted URL goes to the callback.
    let asked = async {
        let Ok(url) = rx.await else {
            return std::future::pending::<()>().await;
        };
        if let Some(pasted) = ui.input(&title, PLACEHOLDER).await {
            deliver(&url, pasted.trim()).await;
            std::future::pending::<()>().await;
        }
    };
    let outcome = tokio::select! {
        r = signin => Some(r),
        () = asked => None,
    };
    match outcome {
        None => {
            ui.notify("Sign-in cancelled.", "info");
            false
        }
        Some(Err(e)) => {
            ui.notify(&format!("Sign-in failed: {e}"), "error");
            false
        }
        Some(Ok(())) => {
            let Some(m) = ctx.mcp else { return false };
            let st = m.reconnect(s).await;
            connected_notice(ctx, s, &st, |k| {
                format!("Signed in to MCP server \"{name}\" ({k} tools).")
            });
            true
        }
    }
}

/// The `input` placeholder of the sign-in.
pub const PLACEHOLDER: &str = "http://127.0.0.1:.../callback?code=...";

/// Hands a pasted redirect URL to the loopback callback named by the
/// authorization URL's `redirect_uri` (its query carries the code and
/// state), as if the browser had arrived there.
async fn deliver(auth_url: &str, pasted: &str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(auth_url) = reqwest013::Url::parse(auth_url) else {
        return;
    };
    // Only to a loopback callback: the authorization URL is the server's
    // endpoint plus our parameters, and the code must not go elsewhere.
    let Some(redirect) = auth_url
        .query_pairs()
        .filter(|(k, _)| k == "redirect_uri")
        .last()
        .filter(|(_, v)| super::urls::is_callback(v))
        .and_then(|(_, v)| url::Url::parse(&v).ok())
    else {
        return;
    };
    let query = reqwest013::Url::parse(pasted)
        .ok()
        .and_then(|u| u.query().map(str::to_string))
        .unwrap_or_else(|| pasted.trim_start_matches('?').to_string());
    let (Some(host), Some(port)) = (redirect.host_str(), redirect.port_or_known_default()) else {
        return;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let Ok(Ok(mut sock)) = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::net::TcpStream::connect((host, port)),
    )
    .await
    else {
        return;
    };
    let req = format!(
        "GET {}?{query} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n",
        redirect.path()
    );
    if sock.write_all(req.as_bytes()).await.is_ok() {
        let mut sink = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), sock.read_to_end(&mut sink)).await;
    }
}

/// Brings the agent's active `tools` in step with the servers' direct
/// tools: `before` names the MCP tools there were, `now` the ones the
/// selection admits now. Gone ones are dropped, the others replaced in
/// place, new ones appended (pi's order after a reconnect).
pub fn refresh_tools(tools: &mut Vec<Arc<dyn Tool>>, before: &[String], now: Vec<Arc<dyn Tool>>) {
    let names: Vec<String> = now.iter().map(|t| t.name().into_owned()).collect();
    tools.retain(|t| {
        let n = t.name().into_owned();
        !before.contains(&n) || names.contains(&n)
    });
    for (t, name) in now.into_iter().zip(names) {
        match tools.iter().position(|x| x.name().into_owned() == name) {
            Some(i) => tools[i] = t,
            None => tools.push(t),
        }
    }
    // The new tools as codemode presents them (its `Codemode:` lines).
    *tools = crate::tools::present(std::mem::take(tools));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::tool::ToolDefinition;
    use crate::tools::{ToolContext, ToolFuture, UpdateSink};

    struct Named(String, String);
    impl Tool for Named {
        fn definition(&self) -> ToolDefinition {
            ToolDefinition {
                name: self.0.clone(),
                description: self.1.clone(),
                parameters: serde_json::json!({"type": "object"}),
                extra: Default::default(),
            }
        }
        fn execute<'a>(
            &'a self,
            _: serde_json::Value,
            _: ToolContext,
            _: UpdateSink,
        ) -> ToolFuture<'a> {
            Box::pin(async { Default::default() })
        }
    }

    fn t(name: &str, d: &str) -> Arc<dyn Tool> {
        Arc::new(Named(name.into(), d.into()))
    }

    fn names(v: &[Arc<dyn Tool>]) -> Vec<String> {
        v.iter()
            .map(|t| format!("{}:{}", t.name().into_owned(), t.definition().description))
            .collect()
    }

    #[test]
    fn refreshed_tools_keep_their_place_and_new_ones_come_last() {
        let mut tools = vec![
            t("read", "r"),
            t("mcp__a__x", "1"),
            t("mcp__a__y", "1"),
            t("mcp__b__z", "1"),
        ];
        let before: Vec<String> = ["mcp__a__x", "mcp__a__y", "mcp__b__z", "mcp__c__hidden"]
            .map(String::from)
            .to_vec();
        refresh_tools(
            &mut tools,
            &before,
            vec![
                t("mcp__a__x", "2"),
                t("mcp__b__z", "1"),
                t("mcp__a__w", "2"),
            ],
        );
        assert_eq!(
            names(&tools),
            ["read:r", "mcp__a__x:2", "mcp__b__z:1", "mcp__a__w:2"]
        );
    }

    /// A pasted redirect goes only to a loopback callback: the last
    /// `redirect_uri` of the authorization URL (ours, appended after any
    /// the server's endpoint carried), and never to another host.
    #[tokio::test]
    async fn pasted_codes_go_only_to_the_loopback_callback() {
        use tokio::io::AsyncReadExt;
        let ours = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let other = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
        let at =
            |l: &tokio::net::TcpListener| format!("http://{}/callback", l.local_addr().unwrap());
        let enc = |u: &str| url::form_urlencoded::byte_serialize(u.as_bytes()).collect::<String>();
        let (ours_url, other_url) = (at(&ours), at(&other));
        // The server's endpoint names another host; ours comes last.
        let auth = format!(
            "https://as.example/authorize?redirect_uri={}&client_id=c&redirect_uri={}",
            enc(&other_url),
            enc(&ours_url)
        );
        let got = tokio::spawn(async move {
            let (mut s, _) = ours.accept().await.unwrap();
            let mut buf = vec![0u8; 1024];
            let n = s.read(&mut buf).await.unwrap();
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        deliver(&auth, "http://127.0.0.1/callback?code=c1&state=s").await;
        let head = tokio::time::timeout(std::time::Duration::from_secs(5), got)
            .await
            .expect("the callback got the code")
            .unwrap();
        assert!(head.starts_with("GET /callback?code=c1&state=s "), "{head}");
        // Only another host: nothing is sent.
        let auth = format!(
            "https://as.example/authorize?redirect_uri={}",
            enc(&other_url)
        );
        deliver(&auth, "?code=c2").await;
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(300), other.accept()).await;
        assert!(waited.is_err(), "the code went to {other_url}");
    }
}
