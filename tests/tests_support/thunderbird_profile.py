"""The stand-in for OSWorld's `thunderbird-profile.tar.gz` (see
`write_thunderbird_profile`): a small profile Debian's Thunderbird opens, with the
tasks' account and a few local messages, so Thunderbird tasks can be proven on
generated assets (`tests_support.asset_files` picks it by URL)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

TB_PROFILE = "t5q2a5hp.default-release"
"""The profile directory OSWorld's Thunderbird tasks read (`~/.thunderbird/<this>/...`)."""
TB_ACCOUNT = "anonym-x2024@outlook.com"
TB_INSTALL_HASH = "FDC34C9F024745EB"
"""Thunderbird's hash of its install directory /usr/lib/thunderbird (Debian's package):
without an `[Install<hash>]` entry naming the profile, Thunderbird 153 makes and opens
a new `*.default-default` profile (checked by launching it)."""
_TB_PREFS = {
    # the tasks' account: IMAP at outlook.office365.com with identity id1, told never to
    # connect (no login at startup, no mail check), so it works offline
    "mail.account.account1.identities": "id1",
    "mail.account.account1.server": "server1",
    "mail.account.account2.server": "server2",
    "mail.accountmanager.accounts": "account1,account2",
    "mail.accountmanager.defaultaccount": "account1",
    "mail.accountmanager.localfoldersserver": "server2",
    "mail.identity.id1.fullName": "Anonym Tester",
    "mail.identity.id1.useremail": TB_ACCOUNT,
    "mail.identity.id1.valid": True,
    "mail.server.server1.check_new_mail": False,
    "mail.server.server1.directory-rel": "[ProfD]ImapMail/outlook.office365.com",
    "mail.server.server1.download_on_biff": False,
    "mail.server.server1.hostname": "outlook.office365.com",
    "mail.server.server1.login_at_startup": False,
    "mail.server.server1.name": TB_ACCOUNT,
    "mail.server.server1.port": 993,
    "mail.server.server1.socketType": 3,
    "mail.server.server1.type": "imap",
    "mail.server.server1.userName": TB_ACCOUNT,
    "mail.server.server2.directory-rel": "[ProfD]Mail/Local Folders",
    "mail.server.server2.hostname": "Local Folders",
    "mail.server.server2.name": "Local Folders",
    "mail.server.server2.type": "none",
    "mail.server.server2.userName": "nobody",
    # no first-run pages, default-client question, telemetry notice or updates
    "app.update.auto": False,
    "datareporting.policy.dataSubmissionPolicyBypassNotification": True,
    "mail.rights.version": 1,
    "mail.shell.checkDefaultClient": False,
    "mailnews.start_page.enabled": False,
    "mail.spotlight.firstRunDone": True,
    "mail.winsearch.firstRunDone": True,
    "mail.provider.suppress_dialog_on_startup": True,
}
_TB_MESSAGES = {  # Local Folders mbox name -> (sender, subject, body) of its messages
    "Inbox": [
        (
            "Outlook.com <no-reply@microsoft.com>",
            "\u6b61\u8fce\u4f7f\u7528\u65b0\u7684 Outlook.com \u5e33\u6236",
            "Welcome to your new Outlook.com account.",
        ),
        ("Anonym Tester <anonym-x2024@outlook.com>", "A Test E-mail", "This is a test e-mail."),
    ],
    "Bills": [
        ("AWS Billing <billing@example.com>", "Your AWS bill for May", "Your bill is available."),
        ("City Power <invoices@example.com>", "Electricity invoice", "Your invoice is attached."),
    ],
}


def _mbox(folder: str, messages: list[tuple[str, str, str]]) -> bytes:
    from email.header import Header

    out = []
    for n, (sender, subject, body) in enumerate(messages, start=1):
        subj = subject if subject.isascii() else Header(subject, "utf-8").encode()
        out.append(
            f"From - Mon Jan {n:02d} 09:00:00 2024\n"
            f"From: {sender}\nTo: Anonym Tester <{TB_ACCOUNT}>\n"
            f"Subject: {subj}\nDate: Mon, {n:02d} Jan 2024 09:00:00 +0000\n"
            f"Message-ID: <standin-{folder.lower()}-{n}@example.com>\n"
            "MIME-Version: 1.0\n"
            "Content-Type: text/plain; charset=UTF-8\n\n"
            f"{body}\n\n"
        )
    return "".join(out).encode()


def write_thunderbird_profile(path: Path) -> None:
    """OSWorld's `thunderbird-profile.tar.gz`, which setups extract into /home/user:
    `.thunderbird/profiles.ini` and `installs.ini` naming `t5q2a5hp.default-release` the
    default profile of this install (`TB_INSTALL_HASH`: Thunderbird opens it instead of
    making a new one and its Account Hub), and that
    profile with a prefs.js holding the tasks' account (IMAP anonym-x2024@outlook.com
    at outlook.office365.com, identity id1, never connecting: the evaluators read
    `mail.identity.id1.*` and `ImapMail/outlook.office365.com/msgFilterRules.dat`, and
    a task removes this account) and Local Folders;
    Local Folders holds Inbox (the two messages a backup task names) and Bills (two
    bills, for starring), mbox files Thunderbird indexes itself; the IMAP account's
    folder holds an empty msgFilterRules.dat. Nothing a task asks for is set (no
    signature, dark theme, filters, unified folders, COMPANY/UNIVERSITY/Promotions
    folders), so an untouched profile scores 0. Deterministic: fixed times, sorted
    entries, gzip without a timestamp."""
    import gzip

    prefs = "".join(
        f'user_pref("{k}", {json.dumps(v, ensure_ascii=False)});\n'
        for k, v in sorted(_TB_PREFS.items())
    )
    prof = f".thunderbird/{TB_PROFILE}"
    files = {
        ".thunderbird/profiles.ini": (
            "[Profile0]\nName=default-release\nIsRelative=1\n"
            f"Path={TB_PROFILE}\nDefault=1\n\n"
            "[General]\nStartWithLastProfile=1\nVersion=2\n\n"
            f"[Install{TB_INSTALL_HASH}]\nDefault={TB_PROFILE}\nLocked=1\n"
        ).encode(),
        ".thunderbird/installs.ini": (
            f"[{TB_INSTALL_HASH}]\nDefault={TB_PROFILE}\nLocked=1\n".encode()
        ),
        f"{prof}/prefs.js": ("// Mozilla User Preferences\n\n" + prefs).encode(),
        f"{prof}/ImapMail/outlook.office365.com/msgFilterRules.dat": b'version="9"\nlogging="no"\n',
        **{
            f"{prof}/Mail/Local Folders/{name}": _mbox(name, msgs)
            for name, msgs in _TB_MESSAGES.items()
        },
    }
    dirs = sorted(
        {"/".join(name.split("/")[:i]) for name in files for i in range(1, name.count("/") + 1)}
    )
    with (
        open(path, "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as archive,
    ):
        for name in dirs:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o700, 1704067200
            archive.addfile(info)
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o600, 1704067200
            archive.addfile(info, io.BytesIO(data))
