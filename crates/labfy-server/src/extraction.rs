//! Extraction jobs (SPEC C4): the analyst starts one over an investigation;
//! a task runs it in batches on the writer, each batch one transaction, so
//! reads and other changes go on between them. A job left `RUNNING` by a
//! stopped server resumes at the next start from its cursor.

use labfy_core::ObjectRef;
use labfy_store::{EXTRACTION_BATCH, ExtractionStep, StoreError};
use uuid::Uuid;

use crate::db::Db;

async fn step(db: &Db, ws: Uuid, job: ObjectRef) -> Result<ExtractionStep, StoreError> {
    let db = db.clone();
    tokio::task::spawn_blocking(move || db.write_blocking(|s| s.extraction_step(ws, &job, EXTRACTION_BATCH)))
        .await
        .map_err(|e| StoreError::Internal(format!("the store task failed: {e}")))?
}

/// Runs `job` to its end on a task of its own. A failure ends the task with
/// the job still `RUNNING` and an error logged; the next start resumes it.
pub fn spawn(db: Db, ws: Uuid, job: ObjectRef) {
    tokio::spawn(async move {
        loop {
            match step(&db, ws, job).await {
                Ok(s) if s.done => {
                    tracing::info!(%job, scanned = s.stats.scanned, mentions = s.stats.mentions,
                                   entities = s.stats.entities_created, "extraction finished");
                    return;
                }
                Ok(_) => tokio::task::yield_now().await,
                Err(e) => {
                    tracing::error!(%job, error = %e, "extraction stopped; it resumes at the next start");
                    return;
                }
            }
        }
    });
}

/// Resumes the extraction jobs of workspace `ws` that a previous run left
/// `RUNNING`; returns how many.
pub async fn resume(db: &Db, ws: Uuid) -> Result<usize, StoreError> {
    let reader = db.clone();
    let jobs = tokio::task::spawn_blocking(move || reader.write_blocking(|s| s.running_extractions(ws)))
        .await
        .map_err(|e| StoreError::Internal(format!("the store task failed: {e}")))??;
    for job in &jobs {
        tracing::info!(%job, "resuming an extraction");
        spawn(db.clone(), ws, *job);
    }
    Ok(jobs.len())
}
