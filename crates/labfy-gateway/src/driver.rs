//! The demo agent's driving (G11, X2): one gateway client making calls
//! through the same pipeline as any other caller, each with its own
//! idempotency key, and announcing its plan. Shared by the research path
//! (`turns`) and the capability path (`demo_capability`).

use std::sync::Arc;

use labfy_core::ObjectRef;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::catalog::Environment;
use crate::error::GatewayError;
use crate::gateway::AgentGateway;
use crate::protocol::*;
use crate::services::{CallOrigin, Scope};

/// The actor recorded for the demo agent's durable effects.
pub const DEMO_ACTOR: &str = "agent:demo";
/// The actor recorded for the local model's durable effects (the agent
/// runtime's calls, and the reread of a resumed local-model turn).
pub const LOCAL_MODEL_ACTOR: &str = "agent:local-model";
/// The name the UI shows for the demo agent (M10).
pub const DEMO_AGENT_LABEL: &str = "Agent de démonstration déterministe";
pub(crate) fn artifact(result: &ToolResult) -> Option<&Value> {
    result.artifacts.first().map(|a| &a.data)
}

pub(crate) fn refs_of(v: Option<&Value>, pointer: &str, field: &str) -> Vec<ObjectRef> {
    v.and_then(|v| v.pointer(pointer))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|x| x.get(field).and_then(Value::as_str)?.parse().ok()).collect())
        .unwrap_or_default()
}

pub(crate) struct Driver<'g> {
    pub(crate) gw: &'g AgentGateway,
    pub(crate) scope: Scope,
    pub(crate) env: &'g Environment,
    pub(crate) turn: Uuid,
    pub(crate) investigation: ObjectRef,
    pub(crate) step: u32,
    pub(crate) lang: Lang,
}

impl<'g> Driver<'g> {
    /// The driver of `turn`, its next call numbered after those it made.
    pub(crate) fn of(gw: &'g AgentGateway, scope: Scope, env: &'g Environment, turn: &Turn) -> Self {
        Self {
            gw,
            scope,
            env,
            turn: turn.turn_id,
            investigation: turn.investigation_id,
            step: turn.calls,
            lang: turn.lang,
        }
    }

    /// A call, its purpose given in both languages (the turn's is kept).
    pub(crate) fn call(
        &mut self,
        tool: &str,
        input: Value,
        purpose: (&str, &str),
    ) -> Result<Arc<ToolResult>, GatewayError> {
        let purpose = if self.lang == Lang::Fr { purpose.0 } else { purpose.1 };
        self.step += 1;
        self.gw.call_as(
            self.scope,
            self.env,
            CallRequest {
                turn_id: self.turn,
                call_id: Uuid::new_v4(),
                tool_id: tool.to_owned(),
                input,
                context: CallContext {
                    investigation_id: Some(self.investigation.to_string()),
                    purpose: Some(purpose.to_owned()),
                },
                object_refs: vec![],
                idempotency_key: format!("demo:{}:{}", self.turn, self.step),
            },
            CallOrigin { actor: DEMO_ACTOR },
        )
    }

    pub(crate) fn plan(&self, steps: &[String], done: usize) {
        self.gw.emit(
            self.scope,
            EventType::PlanUpdated,
            self.turn,
            vec![],
            json!({"agent": DEMO_AGENT_LABEL, "steps": steps, "done": done}),
        );
    }
}
