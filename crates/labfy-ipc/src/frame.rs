//! Length-prefixed frames: a 4-byte big-endian length, then that many bytes
//! of JSON. Bounded in size and in time.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::IpcError;

/// Largest frame accepted or sent (1 MiB).
pub const MAX_FRAME_BYTES: u32 = 1024 * 1024;
/// Default deadline of one read or write.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Writes `value` as one frame.
pub async fn write_frame<W, T>(w: &mut W, value: &T, timeout: Duration) -> Result<(), IpcError>
where
    W: AsyncWrite + Unpin,
    T: Serialize,
{
    let body = serde_json::to_vec(value).map_err(|e| IpcError::Malformed(e.to_string()))?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&l| l <= MAX_FRAME_BYTES)
        .ok_or(IpcError::Oversized { len: u32::try_from(body.len()).unwrap_or(u32::MAX), max: MAX_FRAME_BYTES })?;
    let mut buf = Vec::with_capacity(4 + body.len());
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(&body);
    tokio::time::timeout(timeout, async {
        w.write_all(&buf).await?;
        w.flush().await
    })
    .await
    .map_err(|_| IpcError::Timeout("writing a frame"))??;
    Ok(())
}

/// Reads one frame and decodes it as `T`. `Ok(None)` on a clean end of
/// stream before the first byte of a frame.
pub async fn read_frame<R, T>(r: &mut R, timeout: Duration) -> Result<Option<T>, IpcError>
where
    R: AsyncRead + Unpin,
    T: DeserializeOwned,
{
    let mut len = [0u8; 4];
    let first = tokio::time::timeout(timeout, r.read(&mut len[..1]))
        .await
        .map_err(|_| IpcError::Timeout("waiting for a frame"))??;
    if first == 0 {
        return Ok(None);
    }
    tokio::time::timeout(timeout, async {
        r.read_exact(&mut len[1..]).await?;
        let n = u32::from_be_bytes(len);
        if n > MAX_FRAME_BYTES {
            return Err(IpcError::Oversized { len: n, max: MAX_FRAME_BYTES });
        }
        let mut body = vec![0u8; n as usize];
        r.read_exact(&mut body).await?;
        serde_json::from_slice(&body).map(Some).map_err(|e| IpcError::Malformed(e.to_string()))
    })
    .await
    .map_err(|_| IpcError::Timeout("reading a frame"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_end_cleanly() {
        let (mut a, mut b) = tokio::io::duplex(4096);
        write_frame(&mut a, &serde_json::json!({"k": "é"}), IO_TIMEOUT).await.unwrap();
        drop(a);
        let v: serde_json::Value = read_frame(&mut b, IO_TIMEOUT).await.unwrap().unwrap();
        assert_eq!(v["k"], "é");
        assert!(read_frame::<_, serde_json::Value>(&mut b, IO_TIMEOUT).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn an_oversized_announcement_is_refused_before_reading_the_body() {
        let (mut a, mut b) = tokio::io::duplex(64);
        a.write_all(&(MAX_FRAME_BYTES + 1).to_be_bytes()).await.unwrap();
        let err = read_frame::<_, serde_json::Value>(&mut b, IO_TIMEOUT).await.unwrap_err();
        assert!(matches!(err, IpcError::Oversized { len, .. } if len == MAX_FRAME_BYTES + 1), "{err}");
    }

    #[tokio::test]
    async fn a_frame_at_the_bound_is_accepted_and_one_past_refused_on_write() {
        let (mut a, mut b) = tokio::io::duplex(2 * MAX_FRAME_BYTES as usize);
        // A JSON string of exactly MAX_FRAME_BYTES bytes (with its quotes).
        let at = "x".repeat(MAX_FRAME_BYTES as usize - 2);
        write_frame(&mut a, &at, IO_TIMEOUT).await.unwrap();
        let back: String = read_frame(&mut b, IO_TIMEOUT).await.unwrap().unwrap();
        assert_eq!(back.len(), at.len());
        let over = "x".repeat(MAX_FRAME_BYTES as usize - 1);
        assert!(matches!(write_frame(&mut a, &over, IO_TIMEOUT).await, Err(IpcError::Oversized { .. })));
    }

    #[tokio::test]
    async fn malformed_json_and_truncated_frames_are_errors() {
        let (mut a, mut b) = tokio::io::duplex(64);
        a.write_all(&3u32.to_be_bytes()).await.unwrap();
        a.write_all(b"{x}").await.unwrap();
        assert!(matches!(read_frame::<_, serde_json::Value>(&mut b, IO_TIMEOUT).await, Err(IpcError::Malformed(_))));
        let (mut a, mut b) = tokio::io::duplex(64);
        a.write_all(&10u32.to_be_bytes()).await.unwrap();
        a.write_all(b"{}").await.unwrap();
        drop(a);
        assert!(matches!(read_frame::<_, serde_json::Value>(&mut b, IO_TIMEOUT).await, Err(IpcError::Io(_))));
    }

    #[tokio::test]
    async fn a_silent_peer_times_out() {
        let (_a, mut b) = tokio::io::duplex(64);
        let err = read_frame::<_, serde_json::Value>(&mut b, Duration::from_millis(50)).await.unwrap_err();
        assert!(matches!(err, IpcError::Timeout(_)));
    }
}
