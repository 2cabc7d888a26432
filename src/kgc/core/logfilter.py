"""Secrets out of logs: what the Kubernetes client, its credential plugins and urllib3 log is
redacted before any handler sees it.

pytest captures log records into the report sections that allure-pytest writes to
``allure-results/*-attachment.txt`` and from there into the HTML report; the console shows
them too. Two of the client's records carry secrets:

- the kubeconfig loader logs a failed exec credential plugin as ``exec: process returned N.
  <the plugin's stderr>`` (through the *root* logger, ``logging.error``) — and a plugin's
  stderr is where a token, a refresh token or a password shows up when it fails;
- urllib3 logs request paths (``Retrying ... : /api/v1/...?query``, and at DEBUG every
  request line), query strings included.

:class:`SecretFilter` drops the plugin's stderr entirely (the record keeps ``exec: process
returned N`` and says how to read the rest), strips query strings from the client's records
and redacts known secret shapes (``Authorization``/``Bearer``, ``token=``/``password=``-like
pairs, userinfo in URLs, PEM private keys) in every record it sees. :func:`install` puts it on
the client's loggers (the CLI) and :func:`pytest_plugin` also on pytest's capture handlers,
which see every record whatever logger it came from. Attachments that may still hold
something sensitive are made private after the session (:func:`make_private`).
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

import pytest

# Loggers the client stack logs through. Filters on a logger apply to records created on it,
# not to its children's: each module logger is named. "" is the root logger, which
# kubernetes.config.kube_config uses (logging.error) for the exec plugin's failure; "client"
# is the kubernetes Configuration's package logger.
CLIENT_LOGGERS = (
    "",
    "client",
    "kubernetes",
    "kubernetes.client",
    "kubernetes.client.rest",
    "kubernetes.config",
    "kubernetes.config.kube_config",
    "kubernetes.config.exec_provider",
    "kubernetes.watch",
    "urllib3",
    "urllib3.connection",
    "urllib3.connectionpool",
    "urllib3.poolmanager",
    "urllib3.response",
    "urllib3.util.retry",
)
_CLIENT_PREFIXES = ("kubernetes", "urllib3", "client")
_KUBERNETES_PKG = f"{os.sep}kubernetes{os.sep}"

WITHHELD = "***"
_EXEC_FAILED = re.compile(r"(exec: process returned -?\d+)\..*", re.S)
_EXEC_NOTE = (r"\1 (the credential plugin's stderr is withheld from logs; run the "
              "kubeconfig's exec command by hand to read it)")
# a query string in a path or URL: up to whitespace or a quote
_QUERY = re.compile(r"(?<=[\w/\]])\?[^\s'\"]+")
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY-----"
                r"|\Z)", re.S), "(private key withheld)"),
    (re.compile(r"\b(authorization|proxy-authorization)(['\"]?\s*[:=]\s*['\"]?)"
                r"(?:(?:bearer|basic|token)\s+)?[^\s'\",;]+", re.I), rf"\1\2{WITHHELD}"),
    (re.compile(r"\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}", re.I), rf"\1 {WITHHELD}"),
    (re.compile(r"\b([\w-]*(?:token|password|passwd|secret|api[_-]?key|credential)s?)"
                r"(['\"]?\s*[:=]\s*['\"]?)[^\s'\",;&}]+", re.I), rf"\1\2{WITHHELD}"),
    (re.compile(r"(://[^/\s:@]*):[^/\s@]+@"), rf"\1:{WITHHELD}@"),
)


def redact_text(text: str) -> str:
    """``text`` with known secret shapes replaced by ``***``."""
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


def _from_client(record: logging.LogRecord) -> bool:
    name = record.name
    return (name.split(".", 1)[0] in _CLIENT_PREFIXES
            or _KUBERNETES_PKG in (record.pathname or ""))


def redact_record(record: logging.LogRecord) -> None:
    """Rewrite ``record`` in place (every later handler sees the redacted one)."""
    try:
        msg = record.getMessage()
    except Exception:  # noqa: BLE001 - a broken format string: keep nothing of it
        msg = f"(unformattable log record from {record.name})"
    new = msg
    if _from_client(record):
        new = _EXEC_FAILED.sub(_EXEC_NOTE, new)
        new = _QUERY.sub(f"?{WITHHELD}", new)
    new = redact_text(new)
    if new != msg:
        record.msg, record.args = new, None
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        text = record.exc_text
        if _from_client(record):
            text = _QUERY.sub(f"?{WITHHELD}", _EXEC_FAILED.sub(_EXEC_NOTE, text))
        record.exc_text = redact_text(text)
    if record.stack_info:
        record.stack_info = redact_text(record.stack_info)


class SecretFilter(logging.Filter):
    """Keeps every record, redacted (see the module docstring)."""

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record)
        return True


FILTER = SecretFilter()


def _add(target: logging.Filterer) -> None:
    if not any(isinstance(f, SecretFilter) for f in target.filters):
        target.addFilter(FILTER)


def install(loggers: tuple[str, ...] = CLIENT_LOGGERS) -> None:
    """Put the filter on the client's loggers and on logging's last-resort handler (what
    prints a warning when nothing configured logging: the CLI). Idempotent."""
    for name in loggers:
        _add(logging.getLogger(name))
    if logging.lastResort is not None:
        _add(logging.lastResort)


def make_private(paths: list[Path]) -> None:
    """Files 0600 and directories 0700 (recursively): report artefacts that may hold
    captured output. Missing paths are skipped."""
    for p in paths:
        try:
            if p.is_dir():
                p.chmod(0o700)
                for f in p.rglob("*"):
                    f.chmod(0o700 if f.is_dir() else 0o600)
            elif p.is_file():
                p.chmod(0o600)
        except OSError:
            continue


class _PytestHooks:
    """Registered by :func:`pytest_plugin`: the filter on pytest's log capture handlers (all
    records, any logger) and private report artefacts."""

    def __init__(self, config: Any) -> None:
        self.config = config

    def _artefacts(self) -> list[Path]:
        opt = self.config.option
        out = []
        for attr in ("allure_report_dir", "xmlpath"):
            v = getattr(opt, attr, None)
            if v:
                out.append(Path(v))
        return out

    def pytest_sessionstart(self, session: Any) -> None:
        lp = self.config.pluginmanager.get_plugin("logging-plugin")
        for attr in ("caplog_handler", "report_handler", "log_cli_handler",
                     "log_file_handler"):
            h = getattr(lp, attr, None)
            if isinstance(h, logging.Handler):
                _add(h)
        # allure-pytest created its directory at configure: closed before anything is written
        dirs = [p for p in self._artefacts() if p.is_dir()]
        make_private(dirs)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: Any) -> None:
        make_private(self._artefacts())


def pytest_plugin(config: Any) -> None:
    """Install the redaction for a pytest run (the kgc plugin calls this first thing)."""
    install()
    if not config.pluginmanager.has_plugin("kgc-logfilter"):
        config.pluginmanager.register(_PytestHooks(config), "kgc-logfilter")
