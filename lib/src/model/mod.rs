//! (being written) Built-in models, models.json, auth.json and API keys.
