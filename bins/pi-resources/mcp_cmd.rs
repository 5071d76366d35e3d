//! `pi-resources mcp login|logout <server>`: OAuth sign-in to an HTTP MCP
//! server and sign-out, as `pi mcp login|logout` do; `pi_lib::mcp` does the
//! work on `<agentDir>/mcp-auth.json`, where pi keeps the tokens.

use std::path::Path;
use std::time::Duration;

use pi_lib::cli::{CliError, EXIT_OK};

/// Sign in to MCP servers (OAuth).
#[derive(Debug, Clone, clap::Args)]
pub struct McpArgs {
    #[command(subcommand)]
    pub command: McpCommand,
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum McpCommand {
    /// Sign in to an HTTP MCP server through the browser.
    ///
    /// Discovers the server's authorization server from its 401 answer,
    /// registers a client (or uses `oauth.clientId`), opens the
    /// authorization URL with `xdg-open` (`open` on macOS; the URL is also
    /// printed on stderr) and waits for the browser at the loopback
    /// callback (`oauth.callbackUrl`, else
    /// `http://127.0.0.1:<oauth.callbackPort or a free port>/callback`). The
    /// tokens go to `<agentDir>/mcp-auth.json` (mode 0600), which pi-run and
    /// pi 1.6.0 both read; pi-run refreshes them with the stored refresh
    /// token. A wider scope a server asked for in a 403 is requested too.
    /// Ours beyond pi: `oauth.grantType: "client_credentials"` signs in
    /// without a browser (`clientId` with `clientSecret`, or with
    /// `privateKey` and `signingAlgorithm` for a signed JWT),
    /// `"enterprise"` exchanges `oauth.idp`'s ID token (SEP-990), and
    /// `oauth.clientMetadataUrl` is used as the client ID when the
    /// authorization server supports Client ID Metadata Documents.
    #[command(after_long_help = LOGIN_HELP)]
    Login {
        /// The server's name in mcp.json.
        server: String,
        /// Time limit for the whole sign-in, in seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 300)]
        timeout: u64,
    },
    /// Sign out of an MCP server: drop its stored tokens.
    ///
    /// Removes the server's record from `<agentDir>/mcp-auth.json` (the file
    /// is replaced atomically, other servers' records stay), as `pi mcp
    /// logout` does; prints `Signed out of MCP server "<server>".`, or `No
    /// stored credentials for MCP server "<server>".` when there were none.
    #[command(after_long_help = LOGOUT_HELP)]
    Logout {
        /// The server's name in mcp.json.
        server: String,
    },
}

const LOGOUT_HELP: &str = "\
Example:
  pi-resources mcp logout github

Exit status:
  0  signed out, or nothing was stored
  1  mcp-auth.json could not be read or written (one line on stderr says why)
  2  usage error, or no such server in the mcp.json files";

const LOGIN_HELP: &str = "\
Example:
  pi-resources mcp login github

Exit status:
  0  signed in; the tokens are stored
  1  the sign-in failed or timed out (one line on stderr says why)
  2  usage error, or no such server in the mcp.json files";

pub fn run(args: McpArgs, agent_dir: &Path, cwd: &Path, trusted: bool) -> Result<i32, CliError> {
    match args.command {
        McpCommand::Login { server, timeout } => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .map_err(|e| CliError::input(format!("cannot start the runtime: {e}")))?;
            let cfg = pi_lib::mcp::config::load(agent_dir, cwd, trusted);
            if !cfg.servers.iter().any(|s| s.name == server) {
                return Err(CliError::input(format!(
                    "no MCP server \"{server}\" in the mcp.json files"
                )));
            }
            rt.block_on(pi_lib::mcp::login(
                agent_dir,
                cwd,
                trusted,
                &server,
                Duration::from_secs(timeout.max(1)),
                &pi_lib::mcp::auth::open_browser,
            ))
            .map_err(CliError::failed)?;
            eprintln!("Signed in to \"{server}\".");
            Ok(EXIT_OK)
        }
        McpCommand::Logout { server } => {
            let cfg = pi_lib::mcp::config::load(agent_dir, cwd, trusted);
            if !cfg.servers.iter().any(|s| s.name == server) {
                return Err(CliError::input(format!(
                    "no MCP server \"{server}\" in the mcp.json files"
                )));
            }
            if pi_lib::mcp::logout(agent_dir, cwd, trusted, &server).map_err(CliError::failed)? {
                println!("Signed out of MCP server \"{server}\".");
            } else {
                println!("No stored credentials for MCP server \"{server}\".");
            }
            Ok(EXIT_OK)
        }
    }
}
