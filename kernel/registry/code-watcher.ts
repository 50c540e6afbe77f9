import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';

/** What a plugin's code is made of; other files (logs, data, editors' swap files) change without making a new version. */
const CODE_FILE = /\.(?:[cm]?[jt]s|json)$/;

/**
 * Watches plugin folders, subfolders included (fs.watch `recursive`, Node 20 on Linux), and reports
 * the folder in which a code file changed. Dot-folders and node_modules are not the plugin's code.
 */
export class CodeWatcher {
  private readonly watchers = new Map<string, fs.FSWatcher>();

  constructor(
    private readonly onChange: (dir: string, file: string) => void,
    private readonly logger: Logger,
  ) {}

  /** Watches exactly these folders from now on: new ones are added, those no longer given are let go. */
  watch(dirs: ReadonlySet<string>): void {
    for (const [dir, watcher] of this.watchers) {
      if (dirs.has(dir)) continue;
      watcher.close();
      this.watchers.delete(dir);
    }
    for (const dir of dirs) {
      if (this.watchers.has(dir) || !fs.existsSync(dir)) continue;
      try {
        const watcher = fs.watch(dir, { recursive: true }, (_event, name) => {
          const relative = name?.toString();
          if (relative && isCode(relative)) this.onChange(dir, path.join(dir, relative));
        });
        watcher.on('error', (err) => this.logger.warn({ err, dir }, 'watching a plugin folder failed'));
        this.watchers.set(dir, watcher);
      } catch (err) {
        this.logger.warn({ err, dir }, 'cannot watch a plugin folder; its code edits need a reload');
      }
    }
  }

  close(): void {
    this.watchers.forEach((watcher) => watcher.close());
    this.watchers.clear();
  }
}

function isCode(relative: string): boolean {
  const parts = relative.split(path.sep);
  return CODE_FILE.test(relative) && !parts.some((part) => part.startsWith('.') || part === 'node_modules');
}
