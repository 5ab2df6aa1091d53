/**
 * A Git repository the test writes, served over Git's smart HTTP protocol on 127.0.0.1 by Git's own
 * server side (`git http-backend`, run as a CGI per request), so Flux's go-git clients and Argo CD's git
 * CLI fetch it exactly as they fetch from a Git host. No authentication: loopback only.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export interface GitHttpServer {
  /** http://127.0.0.1:<port>/<name>.git */
  readonly url: string;
  /**
   * Writes the files (path → content; null deletes), commits everything as one commit on main and
   * pushes it to the served repository. Returns the commit's SHA.
   */
  commit(files: Record<string, string | null>, message: string): string;
  close(): Promise<void>;
}

const GIT_ENV = {
  GIT_AUTHOR_NAME: 'kd-connections tests',
  GIT_AUTHOR_EMAIL: 'tests@kd-connections.invalid',
  GIT_COMMITTER_NAME: 'kd-connections tests',
  GIT_COMMITTER_EMAIL: 'tests@kd-connections.invalid',
  // Never read the user's or the machine's git configuration.
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
};

export async function startGitHttpServer(name = 'gitops'): Promise<GitHttpServer> {
  const root = mkdtempSync(join(tmpdir(), 'kd-git-'));
  const bare = join(root, 'served', `${name}.git`);
  const work = join(root, 'work');
  const git = (cwd: string, ...args: string[]) =>
    execFileSync('git', args, { cwd, env: { ...process.env, ...GIT_ENV }, encoding: 'utf8' }).trim();
  mkdirSync(bare, { recursive: true });
  git(bare, 'init', '--quiet', '--bare', '--initial-branch=main');
  git(root, 'init', '--quiet', '--initial-branch=main', work);
  git(work, 'remote', 'add', 'origin', bare);

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const cgi = spawn('git', ['http-backend'], {
      env: {
        ...process.env,
        ...GIT_ENV,
        GIT_PROJECT_ROOT: join(root, 'served'),
        GIT_HTTP_EXPORT_ALL: '1',
        REQUEST_METHOD: req.method ?? 'GET',
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.replace(/^\?/, ''),
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        REMOTE_ADDR: '127.0.0.1',
        // Request bodies may be gzip-compressed; protocol v2 is asked for in a header.
        HTTP_CONTENT_ENCODING: req.headers['content-encoding'] ?? '',
        GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    req.pipe(cgi.stdin);
    // CGI output: header lines, a blank line, then the body.
    let head = Buffer.alloc(0);
    let headerDone = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (headerDone) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const sep = head.indexOf('\r\n\r\n') >= 0 ? head.indexOf('\r\n\r\n') : head.indexOf('\n\n');
      if (sep < 0) return;
      const sepLen = head[sep] === 13 ? 4 : 2;
      let status = 200;
      for (const line of head.subarray(0, sep).toString('latin1').split(/\r?\n/)) {
        const i = line.indexOf(':');
        if (i < 0) continue;
        const key = line.slice(0, i).trim();
        const value = line.slice(i + 1).trim();
        if (key.toLowerCase() === 'status') status = Number.parseInt(value, 10);
        else res.setHeader(key, value);
      }
      res.writeHead(status);
      headerDone = true;
      res.write(head.subarray(sep + sepLen));
    });
    let stderr = '';
    cgi.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    cgi.on('close', (code) => {
      if (!headerDone) {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.write(`git http-backend exited ${code}: ${stderr}`);
      }
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}/${name}.git`,
    commit(files, message) {
      for (const [path, content] of Object.entries(files)) {
        const p = join(work, path);
        if (content === null) rmSync(p, { force: true });
        else {
          mkdirSync(dirname(p), { recursive: true });
          writeFileSync(p, content);
        }
      }
      git(work, 'add', '--all');
      git(work, 'commit', '--quiet', '--allow-empty', '-m', message);
      git(work, 'push', '--quiet', 'origin', 'main');
      return git(work, 'rev-parse', 'HEAD');
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(root, { recursive: true, force: true });
    },
  };
}
