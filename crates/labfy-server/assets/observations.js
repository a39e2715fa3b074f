// A tool result's observations (SPEC U4): the gateway writes them in
// English, for the model and the logs; the analyst reads them in the chosen
// language. Each known line is matched whole and said again from the
// message catalogue, its numbers formatted; its raw text stays in the
// element's title. A line no pattern knows is shown as written (it is the
// tool's text: textContent only).

import { enumLabel, fmtNumber, t } from './i18n.js';

const N = '([0-9]+)';
const ID = '([a-z_]+:[0-9a-f-]{36})';
const CAP = '([a-z][a-z0-9_.]*)';
const VER = '([0-9]+\\.[0-9]+\\.[0-9]+)';

// [pattern, key, how each group is shown: 'n' a number, 's' as written,
// 'j' a job's status, 'k' a tool request's kind].
const PATTERNS = [
  [`${N} evidence, ${N} entities, ${N} relations`, 'obs_overview', 'nnn'],
  [`${N} hits`, 'obs_hits', 'n'],
  [`${N} hits \\(more exist\\)`, 'obs_hits_more', 'n'],
  [`${N} shared entities`, 'obs_shared', 'n'],
  [`degree ${N}`, 'obs_degree', 'n'],
  [`${N} of ${N} neighbours`, 'obs_neighbours', 'nn'],
  [`${N} bytes, ${N} entities mentioned`, 'obs_summary', 'nn'],
  [`characters ${N}–${N} of ${N}`, 'obs_excerpt', 'nnn'],
  [`${N} provenance records`, 'obs_provenance', 'n'],
  [`${N} provenance records \\(bounded\\)`, 'obs_provenance_bounded', 'n'],
  ['([A-Z_]+) at ([0-9]+) %', 'obs_job', 'jn'],
  ['proposal shown to the analyst; nothing stored', 'obs_proposal', ''],
  [`${N} research requests`, 'obs_research_state', 'n'],
  ['research request prepared', 'obs_prepared', ''],
  ['research request already prepared \\(replay\\)', 'obs_prepared_replay', ''],
  ['no grant, no campaign, no network: a human decides', 'obs_prepared_nothing', ''],
  [`fetched over Tor under ${ID}, stored as ${ID}`, 'obs_fetched', 'ss'],
  [`${ID} had already fetched it as ${ID}: no new request`, 'obs_fetched_before', 'ss'],
  [`HEAD answered ${N} under ${ID}; nothing stored`, 'obs_head', 'ns'],
  [`${N} capabilities found`, 'obs_capabilities', 'n'],
  [`${N} capabilities found; ${N} manifests left out`, 'obs_capabilities_left', 'nn'],
  [`tool request prepared \\(pause ([A-C][12]?)\\): ([a-z]+) ${CAP}`, 'obs_tool_request', 'sks'],
  ['tool request already prepared \\(replay, pause ([A-C][12]?)\\)', 'obs_tool_request_replay', 's'],
  ['nothing installed, integrated or run: a human decides', 'obs_tool_request_nothing', ''],
  [`${CAP} ${VER} is already installed in this workspace`, 'obs_installed_already', 'ss'],
  [`${CAP} is already callable in this investigation \\(capability\\.execute\\)`, 'obs_integrated_already', 's'],
  [`${N} of ${N} tests failed: nothing proposed`, 'obs_tests_failed', 'nn'],
  // The diagnostics of a pause (every paused turn shows one).
  [`${ID} waits for a human decision \\(grant or refuse\\) in the UI`, 'obs_waits_research', 's'],
  [`${ID} waits for a human decision \\(approve or refuse\\) in the UI \\(pause ([A-C][12]?)\\)`, 'obs_waits_tool', 'ss'],
  // A sandbox run (sandbox.exec), or a capability's (its id and version first).
  [`([a-z0-9._-]+) ran confined with no network in ${N} ms under ([^:]+): exit code (-?[0-9]+)`, 'obs_run_exit', 'snss'],
  [`([a-z0-9._-]+) ran confined with no network in ${N} ms under ([^:]+): ended by signal ${N}`, 'obs_run_signal', 'snsn'],
  [`([a-z0-9._-]+) ran confined with no network in ${N} ms under ([^:]+): stopped: (.+)`, 'obs_run_stopped', 'snss'],
  [`${CAP} ${VER}: ([a-z0-9._-]+) ran confined with no network in ${N} ms under ([^:]+): exit code (-?[0-9]+)`, 'obs_cap_exit', 'sssnss'],
  [`${CAP} ${VER}: ([a-z0-9._-]+) ran confined with no network in ${N} ms under ([^:]+): (.+)`, 'obs_cap_other', 'sssnss'],
].map(([p, key, kinds]) => [new RegExp(`^${p}$`), key, kinds]);

// The sentence for one observation line, and whether it was known.
export function observationText(raw) {
  const line = String(raw ?? '');
  for (const [re, key, kinds] of PATTERNS) {
    const m = re.exec(line);
    if (!m) continue;
    const params = {};
    [...kinds].forEach((kind, i) => {
      const v = m[i + 1];
      if (kind === 'n') params[`a${i}`] = fmtNumber(Number(v));
      else if (kind === 'j') params[`a${i}`] = enumLabel('jobst', v);
      else if (kind === 'k') params[`a${i}`] = enumLabel('toolkind', v);
      else params[`a${i}`] = v;
    });
    return { text: t(key, params), known: true };
  }
  return { text: line, known: false };
}
