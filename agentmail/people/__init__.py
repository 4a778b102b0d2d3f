"""Letters for people: plain-text notices, approval by mail, announcements, the digest, escalation."""
