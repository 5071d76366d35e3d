//! The model registry against the real pi 1.6.0: listings and Model objects
//! pi printed for the same files (committed under tests/fixtures/models/
//! by tests/oracle/dump-models.sh), plus models.json / auth.json / env key
//! handling and CLI selection through real files in a temp agent dir.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use pi_lib::format::model::ThinkingLevel;
use pi_lib::model::{
    list_models, render_model_list, resolve_selection, ModelError, ModelRegistry,
    SelectionDefaults, SelectionRequest,
};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/models")
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const ALL_KEYS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "OPENROUTER_API_KEY",
    "GROQ_API_KEY",
    "XAI_API_KEY",
    "MISTRAL_API_KEY",
    "DEEPSEEK_API_KEY",
    "CEREBRAS_API_KEY",
];

fn agent(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    for (name, text) in files {
        std::fs::write(d.path().join(name), text).expect("write");
    }
    d
}

#[test]
fn list_all_equals_pi() {
    let e: HashMap<String, String> = ALL_KEYS
        .iter()
        .map(|k| (k.to_string(), "x".into()))
        .collect();
    let reg = ModelRegistry::builtin_with_env(Path::new("/none"), e);
    let ours = render_model_list(&list_models(&reg, None));
    let pi = read(&fixtures().join("expected/list-all.txt"));
    for (i, (a, b)) in ours.lines().zip(pi.lines()).enumerate() {
        assert_eq!(a, b, "line {}", i + 1);
    }
    assert_eq!(ours.lines().count(), pi.lines().count());
}

#[test]
fn list_custom_equals_pi() {
    let dir = fixtures().join("custom");
    let reg = ModelRegistry::load_with_env(&dir, env(&[("ANTHROPIC_API_KEY", "x")])).expect("load");
    assert_eq!(
        render_model_list(&list_models(&reg, None)),
        read(&fixtures().join("expected/list-custom.txt"))
    );
    assert_eq!(
        render_model_list(&list_models(&reg, Some("opus 4"))),
        read(&fixtures().join("expected/list-custom-opus.txt"))
    );
    assert_eq!(
        render_model_list(&list_models(&reg, Some("zzzz"))),
        "No models matching \"zzzz\"\n"
    );
    // The provider without any key ("nokey") is not listed, as in pi.
    assert!(list_models(&reg, None)
        .rows
        .iter()
        .all(|r| r.provider != "nokey"));
}

#[test]
fn custom_model_objects_equal_pi() {
    let dir = fixtures().join("custom");
    let reg = ModelRegistry::load_with_env(&dir, env(&[("ANTHROPIC_API_KEY", "x")])).expect("load");
    let expected = read(&fixtures().join("expected/custom-models.jsonl"));
    let mut n = 0;
    for line in expected.lines() {
        let want: Value = serde_json::from_str(line).expect("jsonl");
        let (p, id) = (
            want["provider"].as_str().unwrap_or(""),
            want["id"].as_str().unwrap_or(""),
        );
        let model = reg
            .find(Some(p), id)
            .unwrap_or_else(|e| panic!("{p}/{id}: {e}"));
        let ours = reg.pi_json(&model).expect("pi json");
        // Same keys in the same order, same values.
        assert_eq!(
            serde_json::to_string(&ours).expect("ser"),
            serde_json::to_string(&want).expect("ser"),
            "{p}/{id}"
        );
        n += 1;
    }
    assert!(n >= 10, "{n}");
    // Headers are kept on our Model (pi keeps them out of the object).
    let llama = reg.find(Some("ollama"), "llama3").expect("llama3");
    assert_eq!(
        llama.headers.as_ref().and_then(|h| h.get("A")),
        Some(&Value::from("b"))
    );
    let opus = reg
        .find(Some("anthropic"), "claude-opus-4-6")
        .expect("opus");
    assert_eq!(
        opus.headers.as_ref().and_then(|h| h.get("X-Team")),
        Some(&Value::from("t1"))
    );
}

#[test]
fn malformed_models_json_names_file_line_and_column() {
    let d = agent(&[(
        "models.json",
        "{\n  \"providers\": {\n    \"mock\": {\"baseUrl\":\"http://x/v1\" \"api\":\"openai-completions\"}\n  }\n}\n",
    )]);
    let e = ModelRegistry::load_with_env(d.path(), HashMap::new()).expect_err("malformed");
    let path = d.path().join("models.json");
    // pi 1.6.0: "Expected ',' or '}' after property value in JSON at position 56 (line 3 column 38)".
    assert_eq!(
        e.to_string(),
        format!(
            "{}:3:38: invalid JSON: expected `,` or `}}`",
            path.display()
        )
    );
    // The lenient load warns and keeps the built-ins, like pi.
    let (reg, errs) = ModelRegistry::load_lenient(d.path(), HashMap::new());
    assert_eq!(errs.len(), 1);
    assert!(reg.all().len() > 500);
}

#[test]
fn schema_errors() {
    let d = agent(&[(
        "models.json",
        r#"{"providers":{"mock":{"api":"openai-completions","apiKey":"k","models":[{"id":"m1","contextWindow":0}]}}}"#,
    )]);
    let e = ModelRegistry::load_with_env(d.path(), HashMap::new()).expect_err("schema");
    assert!(
        e.to_string()
            .ends_with("models.json: providers.mock.models.0.contextWindow: must be > 0"),
        "{e}"
    );
    let d = agent(&[(
        "models.json",
        r#"{"providers":{"mock":{"baseUrl":"http://x/v1","models":[{"id":"m1"}]}}}"#,
    )]);
    let e = ModelRegistry::load_with_env(d.path(), HashMap::new()).expect_err("no api");
    assert!(
        e.to_string().contains(
            "Provider mock, model m1: no \"api\" specified. Set at provider or model level."
        ),
        "{e}"
    );
}

#[test]
fn key_precedence_matches_pi_print_api_key() {
    // Observed with `pi auth print-api-key --provider anthropic`:
    // auth.json > models.json apiKey > environment.
    let auth = r#"{"anthropic":{"type":"api_key","key":"from-auth"}}"#;
    let models = r#"{"providers":{"anthropic":{"baseUrl":"http://x","apiKey":"from-models"}}}"#;
    let e = env(&[("ANTHROPIC_API_KEY", "from-env")]);
    let key = |files: &[(&str, &str)], cli: Option<&str>| {
        let d = agent(files);
        let reg = ModelRegistry::load_with_env(d.path(), e.clone()).expect("load");
        reg.api_key("anthropic", cli).expect("key")
    };
    assert_eq!(
        key(&[("auth.json", auth), ("models.json", models)], None).as_deref(),
        Some("from-auth")
    );
    assert_eq!(
        key(&[("models.json", models)], None).as_deref(),
        Some("from-models")
    );
    assert_eq!(key(&[], None).as_deref(), Some("from-env"));
    assert_eq!(
        key(&[("auth.json", auth), ("models.json", models)], Some("cli")).as_deref(),
        Some("cli")
    );
}

#[test]
fn key_values_resolve_env_and_commands() {
    let d = agent(&[
        (
            "auth.json",
            r#"{"openai":{"type":"api_key","key":"!echo  hello "},"groq":{"type":"api_key","key":"$MYVAR"},"google":{"type":"oauth","access":"a","refresh":"r","expires":1}}"#,
        ),
        (
            "models.json",
            r#"{"providers":{"anthropic":{"baseUrl":"http://x","apiKey":"${MYVAR}-$$"},"xai":{"baseUrl":"http://x","apiKey":"$UNSET_VAR"}}}"#,
        ),
    ]);
    let reg = ModelRegistry::load_with_env(d.path(), env(&[("MYVAR", "v")])).expect("load");
    assert_eq!(
        reg.api_key("openai", None).expect("cmd").as_deref(),
        Some("hello")
    );
    assert_eq!(
        reg.api_key("groq", None).expect("var").as_deref(),
        Some("v")
    );
    assert_eq!(
        reg.api_key("anthropic", None).expect("interp").as_deref(),
        Some("v-$")
    );
    let e = reg.api_key("xai", None).expect_err("unset");
    assert!(e.to_string().contains("UNSET_VAR is not set"), "{e}");
    let e = reg.api_key("google", None).expect_err("oauth");
    assert!(matches!(e, ModelError::OAuthUnsupported { .. }), "{e}");
    assert!(e
        .to_string()
        .contains("configured with OAuth, not an API key"));
    // OAuth counts as configured for listing, as in pi.
    assert!(reg.has_credentials("google"));
    // An env key still works next to an OAuth entry.
    let reg =
        ModelRegistry::load_with_env(d.path(), env(&[("MYVAR", "v"), ("GEMINI_API_KEY", "g")]))
            .expect("load");
    assert_eq!(
        reg.api_key("google", None).expect("env").as_deref(),
        Some("g")
    );
}

#[test]
fn auth_header_and_header_values() {
    let d = agent(&[(
        "models.json",
        r#"{"providers":{"p":{"baseUrl":"http://x/v1","api":"openai-completions","apiKey":"k","authHeader":true,
            "headers":{"X-A":"$MYVAR"},"models":[{"id":"m"}]}}}"#,
    )]);
    let reg = ModelRegistry::load_with_env(d.path(), env(&[("MYVAR", "v")])).expect("load");
    let m = reg.find(Some("p"), "m").expect("m");
    let key = reg.api_key("p", None).expect("key");
    let r = reg.resolve_headers(&m, key.as_deref()).expect("headers");
    let h = r.headers.expect("headers");
    assert_eq!(h.get("X-A"), Some(&Value::from("v")));
    assert_eq!(h.get("Authorization"), Some(&Value::from("Bearer k")));
}

#[test]
fn selection_from_settings_and_trust() {
    let d = agent(&[(
        "settings.json",
        r#"{"defaultProvider":"openai","defaultModel":"gpt-4.1","defaultThinkingLevel":"low"}"#,
    )]);
    let cwd = tempfile::tempdir().expect("cwd");
    std::fs::create_dir_all(cwd.path().join(".pi")).expect("mkdir");
    std::fs::write(
        cwd.path().join(".pi/settings.json"),
        r#"{"defaultProvider":"anthropic","defaultModel":"claude-sonnet-4-6","defaultThinkingLevel":"high"}"#,
    )
    .expect("write");
    let reg = ModelRegistry::load_with_env(
        d.path(),
        env(&[("OPENAI_API_KEY", "o"), ("ANTHROPIC_API_KEY", "a")]),
    )
    .expect("load");
    let pick = |trusted: bool, req: SelectionRequest| {
        let defaults = SelectionDefaults::load(d.path(), cwd.path(), trusted).expect("settings");
        let s = resolve_selection(&reg, &req, &defaults).expect("select");
        (
            format!("{}/{}", s.model.provider, s.model.id),
            s.thinking,
            s.api_key,
        )
    };
    let (m, t, k) = pick(false, SelectionRequest::default());
    // gpt-4.1 has no reasoning: thinking clamps to off.
    assert_eq!(
        (m.as_str(), t, k.as_deref()),
        ("openai/gpt-4.1", ThinkingLevel::Off, Some("o"))
    );
    let (m, t, _) = pick(true, SelectionRequest::default());
    assert_eq!(
        (m.as_str(), t),
        ("anthropic/claude-sonnet-4-6", ThinkingLevel::High)
    );
    // --model with a suffix beats settings; --thinking beats the suffix.
    let (m, t, _) = pick(
        true,
        SelectionRequest {
            model: Some("opus:xhigh".into()),
            ..Default::default()
        },
    );
    assert_eq!(
        (m.as_str(), t),
        ("anthropic/claude-opus-5-5", ThinkingLevel::Xhigh)
    );
    let (_, t, k) = pick(
        true,
        SelectionRequest {
            provider: Some("ANTHROPIC".into()),
            model: Some("opus:minimal".into()),
            thinking: Some("low".into()),
            api_key: Some("cli".into()),
            ..Default::default()
        },
    );
    assert_eq!((t, k.as_deref()), (ThinkingLevel::Low, Some("cli")));
}

#[test]
fn selection_errors() {
    let d = agent(&[]);
    let reg = ModelRegistry::load_with_env(d.path(), HashMap::new()).expect("load");
    let run = |model: &str| {
        let req = SelectionRequest {
            model: Some(model.into()),
            ..Default::default()
        };
        resolve_selection(&reg, &req, &SelectionDefaults::default()).map(|s| s.model.id)
    };
    let e = run("claude-opus-4-6").expect_err("no key");
    assert!(
        e.to_string()
            .starts_with("No API key found for anthropic.\n"),
        "{e}"
    );
    assert_eq!(
        run("nope").expect_err("unknown").to_string(),
        "Model \"nope\" not found. Use --list-models to see available models."
    );
    let e = resolve_selection(
        &reg,
        &SelectionRequest::default(),
        &SelectionDefaults::default(),
    )
    .expect_err("none");
    assert!(e.to_string().starts_with("No models available."), "{e}");
    let bad = agent(&[("settings.json", "{\"defaultModel\": }")]);
    let e = SelectionDefaults::load(bad.path(), bad.path(), false).expect_err("bad settings");
    assert!(
        e.to_string().contains("settings.json:1:18: invalid JSON"),
        "{e}"
    );
}

#[test]
fn faux_models_need_no_key() {
    // The faux provider's baseUrl names its script; it is not opened here,
    // but it still lives in the test's own directory.
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("script.jsonl");
    let models = serde_json::json!({"providers":{"faux":{"api":"faux","baseUrl":script.display().to_string(),"models":[{"id":"faux-1"}]}}});
    let d = agent(&[("models.json", models.to_string().as_str())]);
    let reg = ModelRegistry::load_with_env(d.path(), HashMap::new()).expect("load");
    let req = SelectionRequest {
        model: Some("faux/faux-1".into()),
        ..Default::default()
    };
    let s = resolve_selection(&reg, &req, &SelectionDefaults::default()).expect("faux");
    assert_eq!(
        (s.model.api.as_str(), s.model.base_url.as_str()),
        ("faux", script.to_str().expect("utf-8 path"))
    );
    assert_eq!(s.api_key, None);
}
