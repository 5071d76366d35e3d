//! pi 1.6.0's extension UI sub-protocol: an extension's
//! dialog becomes an `extension_ui_request` record with a fresh UUID, the
//! client answers with `extension_ui_response` on stdin, and the dialog
//! resolves with the answer — or pi's default when the client cancels,
//! answers with the wrong shape, or the dialog's `timeout` (ms) runs out.
//! Unknown or late answers are dropped; they never produce a `response`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::oneshot;

use super::io::Out;
use crate::agent::hooks::BoxFuture;
use crate::extensions::ui::UiTransport;

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>;

/// The RPC client as the extensions' UI.
pub struct RpcUi {
    out: Out,
    pending: Pending,
    /// The client is gone (stdin ended): dialogs resolve with their
    /// defaults at once.
    gone: std::sync::atomic::AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The wire name of a runner `ui.*` method.
fn wire_method(method: &str) -> String {
    match method {
        "ui.setEditorText" => "set_editor_text".into(),
        m => m.strip_prefix("ui.").unwrap_or(m).to_string(),
    }
}

/// What the dialog resolves with for the client's answer (`Null`: the
/// default). `cancelled` wins.
fn answer_value(method: &str, v: Option<Value>) -> Value {
    let Some(v) = v else {
        return Value::Null;
    };
    if v.get("cancelled").and_then(Value::as_bool) == Some(true) {
        return Value::Null;
    }
    match method {
        "ui.confirm" => match v.get("confirmed") {
            Some(Value::Bool(b)) => Value::Bool(*b),
            _ => Value::Null,
        },
        _ => match v.get("value") {
            Some(Value::String(s)) => Value::String(s.clone()),
            _ => Value::Null,
        },
    }
}

impl RpcUi {
    pub fn new(out: Out) -> Arc<RpcUi> {
        Arc::new(RpcUi {
            out,
            pending: Arc::default(),
            gone: Default::default(),
        })
    }

    /// A client's `extension_ui_response`: resolves its dialog; an
    /// unknown or stale id is dropped.
    pub fn answer(&self, v: Value) {
        let Some(id) = v.get("id").and_then(Value::as_str) else {
            return;
        };
        if let Some(tx) = lock(&self.pending).remove(id) {
            let _ = tx.send(v);
        }
    }

    /// A fire-and-forget `notify` request (`notifyType` `info`, `warning`
    /// or `error`), as an extension's `ctx.ui.notify` sends it.
    pub fn notice(&self, message: &str, kind: &str) {
        let id = uuid::Uuid::new_v4().to_string();
        self.request(
            &id,
            "ui.notify",
            serde_json::json!({"message": message, "notifyType": kind}),
        );
    }

    /// Resolves every open dialog, and every later one at once, with its
    /// default (the client is gone).
    pub fn cancel_all(&self) {
        self.gone.store(true, std::sync::atomic::Ordering::Relaxed);
        lock(&self.pending).clear();
    }

    fn request(&self, id: &str, method: &str, params: Value) {
        let mut m = Map::new();
        m.insert("type".into(), "extension_ui_request".into());
        m.insert("id".into(), id.into());
        m.insert("method".into(), wire_method(method).into());
        if let Value::Object(p) = params {
            for (k, v) in p {
                m.insert(k, v);
            }
        }
        self.out.record(&Value::Object(m));
    }
}

impl UiTransport for RpcUi {
    fn dialog(&self, method: &str, params: Value) -> BoxFuture<'static, Result<Value, String>> {
        if self.gone.load(std::sync::atomic::Ordering::Relaxed) {
            return Box::pin(std::future::ready(Ok(Value::Null)));
        }
        let id = uuid::Uuid::new_v4().to_string();
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id.clone(), tx);
        // `editor` has no timeout in pi.
        let timeout = params
            .get("timeout")
            .and_then(Value::as_f64)
            .filter(|t| *t > 0.0 && method != "ui.editor")
            .map(|t| Duration::from_millis(t as u64));
        self.request(&id, method, params);
        let pending = Arc::clone(&self.pending);
        let method = method.to_string();
        Box::pin(async move {
            let got = match timeout {
                Some(t) => match tokio::time::timeout(t, rx).await {
                    Ok(r) => r.ok(),
                    Err(_) => {
                        lock(&pending).remove(&id);
                        None
                    }
                },
                None => rx.await.ok(),
            };
            Ok(answer_value(&method, got))
        })
    }

    fn notify(&self, method: &str, params: Value) {
        let id = uuid::Uuid::new_v4().to_string();
        self.request(&id, method, params);
    }
}

/// The `/mcp` command asks and tells the RPC client through the same
/// sub-protocol as an extension.
impl crate::mcp::command::Ui for RpcUi {
    fn notify(&self, message: &str, kind: &str) {
        self.notice(message, kind);
    }

    fn select(&self, title: &str, options: &[String]) -> BoxFuture<'static, Option<String>> {
        let d = self.dialog(
            "ui.select",
            serde_json::json!({"title": title, "options": options}),
        );
        Box::pin(async move { d.await.ok().and_then(|v| v.as_str().map(str::to_string)) })
    }

    fn input(&self, title: &str, placeholder: &str) -> BoxFuture<'static, Option<String>> {
        let d = self.dialog(
            "ui.input",
            serde_json::json!({"title": title, "placeholder": placeholder}),
        );
        Box::pin(async move { d.await.ok().and_then(|v| v.as_str().map(str::to_string)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            lock(&self.0).extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn requests(b: &Buf) -> Vec<Value> {
        String::from_utf8_lossy(&lock(&b.0))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn dialogs_round_trip_with_pi_defaults() {
        let buf = Buf::default();
        let ui = RpcUi::new(Out::new(Box::new(buf.clone())));
        let select = ui.dialog("ui.select", json!({"title": "Pick", "options": ["a", "b"]}));
        let r = &requests(&buf)[0];
        assert_eq!(r["type"], "extension_ui_request");
        assert_eq!(r["method"], "select");
        assert_eq!(r["options"], json!(["a", "b"]));
        let id = r["id"].as_str().unwrap().to_string();
        ui.answer(json!({"type": "extension_ui_response", "id": "stale", "value": "x"}));
        ui.answer(json!({"type": "extension_ui_response", "id": id, "value": "b"}));
        assert_eq!(select.await.unwrap(), json!("b"));
        // cancelled wins; a wrong shape is the default.
        let c = ui.dialog("ui.confirm", json!({"title": "Sure?", "message": "m"}));
        let id = requests(&buf)[1]["id"].as_str().unwrap().to_string();
        ui.answer(json!({"id": id, "confirmed": true, "cancelled": true}));
        assert_eq!(c.await.unwrap(), Value::Null);
        let i = ui.dialog("ui.input", json!({"title": "Name"}));
        let id = requests(&buf)[2]["id"].as_str().unwrap().to_string();
        ui.answer(json!({"id": id, "value": 3}));
        assert_eq!(i.await.unwrap(), Value::Null);
        // A timeout resolves with the default; a later answer is ignored.
        let t = ui.dialog(
            "ui.select",
            json!({"title": "T", "options": ["x"], "timeout": 30}),
        );
        assert_eq!(t.await.unwrap(), Value::Null);
        let id = requests(&buf)[3]["id"].as_str().unwrap().to_string();
        ui.answer(json!({"id": id, "value": "x"}));
        // Notices go out with pi's wire names.
        ui.notify("ui.setEditorText", json!({"text": "draft"}));
        let n = &requests(&buf)[4];
        assert_eq!(n["method"], "set_editor_text");
        assert_eq!(n["text"], "draft");
    }

    #[tokio::test]
    async fn once_the_client_is_gone_dialogs_resolve_with_defaults_at_once() {
        let buf = Buf::default();
        let ui = RpcUi::new(Out::new(Box::new(buf.clone())));
        let open = ui.dialog("ui.confirm", json!({"title": "Sure?"}));
        ui.cancel_all();
        assert_eq!(open.await.unwrap(), Value::Null);
        let later = ui.dialog("ui.select", json!({"title": "Pick", "options": ["a"]}));
        let got = tokio::time::timeout(Duration::from_secs(5), later).await;
        assert_eq!(got.expect("no wait").unwrap(), Value::Null);
        assert_eq!(
            requests(&buf).len(),
            1,
            "nothing asked after the client left"
        );
    }
}
