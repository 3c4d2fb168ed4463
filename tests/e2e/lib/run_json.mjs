// `oxinfer run --json --top-logprobs K` output (one JSON object per line) → the greedy steps the
// oracle tests compare with llama.cpp's: {generated_tokens, steps: [{token, top: [{token, logprob}]}]}.
// Lines that are not token events (the final summary) are skipped.
export function runJsonSteps(stdout) {
  const steps = [];
  for (const line of stdout.split("\n")) {
    if (!line.trim()) continue;
    const j = JSON.parse(line);
    if (j.id === undefined || !Array.isArray(j.top_logprobs)) continue;
    steps.push({ token: j.id, top: j.top_logprobs.map((e) => ({ token: e.id, logprob: e.logprob })) });
  }
  return { generated_tokens: steps.map((s) => s.token), steps };
}
