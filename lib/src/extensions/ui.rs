//! Where extension UI calls (`ctx.ui.select/confirm/input/editor`, and the
//! fire-and-forget `notify`, `setStatus`, …) go when the run has a client
//! that can answer: in `pi-run --mode rpc`, pi 1.6.0's
//! `extension_ui_request` / `extension_ui_response` sub-protocol
//! (dialogs as request/response records). Without one, the runner answers pi's no-UI defaults.

use serde_json::Value;

use crate::agent::hooks::BoxFuture;

/// A client that shows extension UI.
pub trait UiTransport: Send + Sync {
    /// A dialog (`ui.select`, `ui.confirm`, `ui.input`, `ui.editor` with
    /// the extension's params): the answer, or `Ok(Value::Null)` for
    /// pi's default (cancelled, timed out, wrong shape).
    fn dialog(&self, method: &str, params: Value) -> BoxFuture<'static, Result<Value, String>>;
    /// A fire-and-forget notice (`ui.notify`, `ui.setStatus`, …).
    fn notify(&self, method: &str, params: Value);
}
