/**
 * App images for the in-container delivery tests, built like the base images (cachedImage) and imported
 * into the running node by the tests that use them:
 * - an image that keeps its own files in /etc/guestconfig, as KubeDirector app images do (configcli's
 *   configcli.conf, base_img_version) plus a stale configmeta.json the delivered one must replace;
 * - an image without any shell or tool: one static program that prints the configmeta file to its log
 *   when it starts and then waits (the distroless case).
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeBusyboxRootfs } from '@kd-connections/images';
import { busyboxKey, cachedImage, type BuiltImage } from './base-images.js';

export const GUESTCONFIG_APP_IMAGE = 'kd.invalid/guestconfig-app:local';
export const NO_SHELL_IMAGE = 'kd.invalid/no-shell:local';

/** The files the app image keeps in /etc/guestconfig. */
export const APP_IMAGE_FILES: Record<string, string> = {
  'configcli.conf': '[configcli]\nconfigmeta = /etc/guestconfig/configmeta.json\n',
  base_img_version: '7.2.1\n',
  'configmeta.json': '{"stale": "from the image"}\n',
};

export function guestconfigAppImage(): BuiltImage {
  const key = `${busyboxKey()}\n${JSON.stringify(APP_IMAGE_FILES)}`;
  const archive = cachedImage(GUESTCONFIG_APP_IMAGE, key, (rootfs) => {
    writeBusyboxRootfs(rootfs);
    mkdirSync(join(rootfs, 'etc/guestconfig'));
    for (const [f, text] of Object.entries(APP_IMAGE_FILES)) writeFileSync(join(rootfs, 'etc/guestconfig', f), text);
    // KubeDirector's layout: the directory is root's, 0700.
    chmodSync(join(rootfs, 'etc/guestconfig'), 0o700);
    return { cmd: ['/bin/sh'] };
  });
  return { name: GUESTCONFIG_APP_IMAGE, archive };
}

/** Printed around the file's content, so a test finds it in the log. */
export const PRINT_BEGIN = 'configmeta-begin';
export const PRINT_END = 'configmeta-end';
const PRINT_CONFIG_C = `#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
  char buf[65536];
  ssize_t n;
  int fd = open("/etc/guestconfig/configmeta.json", O_RDONLY);
  if (fd < 0) { perror("configmeta-missing"); fflush(stderr); }
  else {
    printf("${PRINT_BEGIN}\\n"); fflush(stdout);
    while ((n = read(fd, buf, sizeof buf)) > 0) fwrite(buf, 1, (size_t)n, stdout);
    printf("\\n${PRINT_END}\\n"); fflush(stdout);
    close(fd);
  }
  for (;;) pause();
}
`;

export function noShellImage(): BuiltImage {
  const archive = cachedImage(NO_SHELL_IMAGE, PRINT_CONFIG_C, (rootfs) => {
    const work = mkdtempSync(join(tmpdir(), 'kd-print-'));
    try {
      writeFileSync(join(work, 'print-config.c'), PRINT_CONFIG_C);
      execFileSync('gcc', [
        '-Os',
        '-Wall',
        '-static',
        '-o',
        join(rootfs, 'print-config'),
        join(work, 'print-config.c'),
      ]);
      execFileSync('strip', [join(rootfs, 'print-config')]);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
    return { entrypoint: ['/print-config'] };
  });
  return { name: NO_SHELL_IMAGE, archive };
}
