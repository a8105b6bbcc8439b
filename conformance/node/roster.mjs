// Record KDCube's agent roster with the admin widget's own code (issue 37 §4).
//
//   node roster.mjs <api.ts of components-react/src/agentic-config> <typescript's package dir>
//   stdin: a JSON list of {"defaults": {...}, "props": {...}} (what the admin ``/props`` route
//   answers); stdout: a JSON list of {"slots": getAppAgents(...).agents, "profiles":
//   getAgentProfiles(...).agents}, one per input, in order.
//
// The roster lives in the widget only (the backend has no agent list): ``getAppAgents`` reads the
// effective config (``defaults`` deep-merged with ``props``) and ``getAgentProfiles`` adds the
// ``surfaces.as_consumer.agents`` keys. This script transpiles api.ts with TypeScript (types
// stripped, nothing else changed), answers the widget's one GET with the given payload, and calls
// those two functions unchanged.
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

const [apiPath, tsDir] = process.argv.slice(2)
const ts = createRequire(join(tsDir, 'package.json'))('typescript')
const js = ts.transpileModule(readFileSync(apiPath, 'utf8'), {
  compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
}).outputText
const dir = mkdtempSync(join(tmpdir(), 'kdcube-roster-'))
const modulePath = join(dir, 'api.mjs')
writeFileSync(modulePath, js)
const { createAgenticConfigApi } = await import(pathToFileURL(modulePath).href)
rmSync(dir, { recursive: true, force: true })

const cases = JSON.parse(readFileSync(0, 'utf8'))
let payload = null
globalThis.fetch = async () => ({ ok: true, status: 200, json: async () => payload })
const api = createAgenticConfigApi({
  baseUrl: () => 'http://kdcube',
  authHeaders: (extra) => ({ ...(extra ?? {}) }),
  tenant: () => 'tenant',
  project: () => 'project',
  opsBundle: () => 'kdcube-services@1-0',
})
const out = []
for (const item of cases) {
  payload = item
  const { agents: slots } = await api.getAppAgents('bundle')
  const { agents: profiles } = await api.getAgentProfiles('bundle')
  out.push({ slots, profiles })
}
process.stdout.write(JSON.stringify(out))
