//! Extensions that register more after they load (tools in
//! `session_start`, a later `registerTool`) join the run's tools, and after
//! a session replacement every extension's factory runs again in its host:
//! the old instances' tools, commands and flags leave, the new ones' join.

use super::*;

impl Runner {
    /// Registrations made after load: new events join at once, new tools
    /// and commands with [`ExtInfo::tools`] / [`ExtInfo::commands`].
    /// While an agent runs, tools registered now join its tool set (active
    /// unless `defaultActive: false`) from its next request on, as pi
    /// refreshes its tools at once.
    pub fn absorb_more(&self) {
        let mut late: Vec<(Arc<dyn crate::tools::Tool>, bool)> = Vec::new();
        for e in self.extensions() {
            for m in e.host.take_more() {
                // The Node host's batch may be for another extension it runs.
                let owner = if m.ext == e.ext {
                    Some(Arc::clone(&e))
                } else {
                    self.extensions()
                        .into_iter()
                        .find(|o| Arc::ptr_eq(&o.host, &e.host) && o.ext == m.ext)
                };
                let Some(owner) = owner else { continue };
                lock(&owner.events).extend(m.events.iter().cloned());
                lock(&self.events).extend(m.events);
                if let Some(me) = self.me.upgrade() {
                    for spec in &m.tools {
                        let tool: Arc<dyn crate::tools::Tool> =
                            Arc::new(crate::extensions::tool::ExtensionTool {
                                host: Arc::clone(&owner.host),
                                ext: owner.ext,
                                path: owner.path.clone(),
                                spec: spec.clone(),
                                context: me.clone(),
                            });
                        late.push((tool, spec.default_active != Some(false)));
                    }
                }
                let mut more = lock(&owner.more);
                more.0.extend(m.tools);
                more.1.extend(m.commands);
            }
        }
        if late.is_empty() || !self.attached() {
            // Before the agent exists, pi-run joins them when it decides
            // the starting set.
            return;
        }
        {
            let mut pool = lock(&self.pool);
            for (t, _) in &late {
                let name = t.name().into_owned();
                match pool.iter_mut().find(|p| p.name().into_owned() == name) {
                    Some(p) => *p = Arc::clone(t),
                    None => pool.push(Arc::clone(t)),
                }
            }
        }
        let builder = lock(&self.prompt).clone();
        let me = self.me.clone();
        self.push_op(Box::new(move |agent, _emit| {
            let mut tools = agent.opts.tools.clone();
            for (t, active) in late {
                let name = t.name().into_owned();
                match tools.iter_mut().find(|p| p.name().into_owned() == name) {
                    Some(p) => *p = t,
                    None if active => tools.push(t),
                    None => {}
                }
            }
            if let Some(me) = me.upgrade() {
                me.retool(agent, tools, builder);
            }
        }));
    }

    /// The agent runs with `tools` from its next request on; the prompt's
    /// sections are rebuilt for them (the next turn records the patch:
    /// the changed `tools`/`rules` sections, `toolsAdded`/`toolsRemoved`,
    /// as pi 1.6.0 records it).
    pub(super) fn retool(
        &self,
        agent: &mut crate::agent::Agent,
        tools: Vec<Arc<dyn crate::tools::Tool>>,
        builder: Option<PromptBuilder>,
    ) {
        if let Some(b) = builder {
            match b(&tools) {
                Ok(sections) => agent.opts.sections = sections,
                Err(e) => eprintln!("{}: system prompt: {e}", self.cfg.prog),
            }
        }
        self.set_tools(
            tools.iter().map(|t| t.name().into_owned()).collect(),
            tools
                .iter()
                .filter_map(|t| serde_json::to_value(t.definition()).ok())
                .collect(),
        );
        agent.opts.tools = tools;
    }

    /// A session replacement, as pi 1.6.0 does it: every process that
    /// reloads (the Node host) runs its extensions' factories again, and
    /// their new registrations replace the old ones in place, in one swap
    /// (handlers, commands, flags, tools; the flag values the command line
    /// gave are given again). A process that does not reload keeps its
    /// registration. The agent's tools follow in an operation: the old
    /// instances' tools leave, the new ones' join (active unless
    /// `defaultActive: false`), the prompt's sections are rebuilt.
    pub(super) async fn reload_all(&self) {
        self.absorb_more();
        let old = self.extensions();
        let mut hosts: Vec<Arc<Host>> = Vec::new();
        for e in &old {
            if e.host.reloads()
                && e.host.dead_reason().is_none()
                && !hosts.iter().any(|h| Arc::ptr_eq(h, &e.host))
            {
                hosts.push(Arc::clone(&e.host));
            }
        }
        if hosts.is_empty() {
            return;
        }
        // The host bounds each factory by its load timeout.
        let limit = self.cfg.event_timeout
            + Duration::from_secs(10) * u32::try_from(old.len()).unwrap_or(u32::MAX).max(1);
        let mut fresh: Vec<(Arc<Host>, Vec<ExtInfo>)> = Vec::new();
        for h in hosts {
            let answer = h
                .request(
                    |id| HostRecord::Reload { id },
                    None,
                    Some(limit),
                    &self.cancel,
                )
                .await;
            // Late registrations of the old instances are void.
            h.take_more();
            let reg = match answer {
                Ok(v) => serde_json::from_value::<crate::format::extension::Register>(v)
                    .map_err(|e| format!("bad reload answer: {e}")),
                Err(HostError::Failed(m)) | Err(HostError::Dead(m)) => Err(m),
                Err(HostError::Timeout) => {
                    Err(format!("did not reload within {} s", limit.as_secs_f64()))
                }
                Err(HostError::Aborted) => Err("reload aborted".into()),
            };
            let mut infos = Vec::new();
            match reg {
                Ok(reg) => {
                    for err in &reg.errors {
                        eprintln!(
                            "{}: extension {}: {}; skipped",
                            self.cfg.prog, err.path, err.message
                        );
                    }
                    for r in reg.extensions {
                        let path = old
                            .iter()
                            .find(|o| Arc::ptr_eq(&o.host, &h) && o.ext == r.ext)
                            .map(|o| o.path.clone())
                            .unwrap_or_else(|| r.path.clone());
                        infos.push(ExtInfo::new(Arc::clone(&h), r.ext, path, r));
                    }
                }
                Err(msg) => eprintln!("{}: extension {}: {msg}", self.cfg.prog, h.display),
            }
            fresh.push((h, infos));
        }
        let (gone, added): (Vec<Arc<ExtInfo>>, Vec<Arc<ExtInfo>>) = {
            let mut exts = lock(&self.exts);
            let mut out = Vec::new();
            let mut gone = Vec::new();
            let mut added = Vec::new();
            for e in exts.iter() {
                match fresh.iter_mut().find(|(h, _)| Arc::ptr_eq(h, &e.host)) {
                    None => out.push(Arc::clone(e)),
                    Some((_, infos)) => {
                        gone.push(Arc::clone(e));
                        // The host's new block takes its first old place.
                        for info in std::mem::take(infos) {
                            let info = Arc::new(info);
                            added.push(Arc::clone(&info));
                            out.push(info);
                        }
                    }
                }
            }
            let mut events = lock(&self.events);
            events.clear();
            for e in &out {
                events.extend(lock(&e.events).iter().cloned());
            }
            *exts = out;
            (gone, added)
        };
        let given = lock(&self.given_flags).clone();
        self.configure_exts(&added, &given).await;
        let Some(me) = self.me.upgrade() else {
            return;
        };
        // The old instances' tools, by what they are (another tool of one
        // of their names, e.g. a built-in subagent control tool that
        // displaced a legacy extension's, stays).
        let old_tools: Vec<(String, String, Value)> = gone
            .iter()
            .flat_map(|e| {
                e.tools()
                    .into_iter()
                    .map(|t| (t.name, t.description, t.parameters))
            })
            .collect();
        let is_old = move |t: &Arc<dyn crate::tools::Tool>| {
            let d = t.definition();
            old_tools
                .iter()
                .any(|(n, desc, p)| *n == d.name && *desc == d.description && *p == d.parameters)
        };
        let mut taken: HashSet<String> = self
            .extensions()
            .iter()
            .filter(|e| !added.iter().any(|a| Arc::ptr_eq(a, e)))
            .flat_map(|e| e.tools().into_iter().map(|t| t.name))
            .collect();
        let mut new_tools: Vec<(Arc<dyn crate::tools::Tool>, bool)> = Vec::new();
        for e in &added {
            for spec in e.tools() {
                if !taken.insert(spec.name.clone()) {
                    eprintln!(
                        "{}: extension {}: Tool \"{}\" conflicts with another extension; skipped",
                        self.cfg.prog, e.path, spec.name
                    );
                    continue;
                }
                let active = spec.default_active != Some(false);
                let tool: Arc<dyn crate::tools::Tool> =
                    Arc::new(crate::extensions::tool::ExtensionTool {
                        host: Arc::clone(&e.host),
                        ext: e.ext,
                        path: e.path.clone(),
                        spec,
                        context: Arc::clone(&me) as Arc<dyn crate::extensions::tool::ContextSource>,
                    });
                new_tools.push((tool, active));
            }
        }
        // A new tool whose name another tool holds (not one of the old
        // instances') does not join.
        let join = |list: &mut Vec<Arc<dyn crate::tools::Tool>>,
                    t: &Arc<dyn crate::tools::Tool>| {
            let name = t.name().into_owned();
            if !list.iter().any(|o| o.name().into_owned() == name) {
                list.push(Arc::clone(t));
            }
        };
        {
            let mut pool = lock(&self.pool);
            pool.retain(|t| !is_old(t));
            for (t, _) in &new_tools {
                join(&mut pool, t);
            }
        }
        let builder = lock(&self.prompt).clone();
        let weak = self.me.clone();
        self.push_op(Box::new(move |agent, _emit| {
            let mut tools = agent.opts.tools.clone();
            tools.retain(|t| !is_old(t));
            for (t, _) in new_tools.iter().filter(|(_, active)| *active) {
                join(&mut tools, t);
            }
            if let Some(me) = weak.upgrade() {
                me.retool(agent, tools, builder);
            }
        }));
    }
}
