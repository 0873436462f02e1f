#!/usr/bin/perl
# jsonl-worker.pl - a fanhub worker in Perl, from docs/worker-protocol.md
# alone: appends every message to options.config.path as one JSON line
# (seq, attempt, pid, start and end in CLOCK_MONOTONIC ns, topic, body).
#   plugin: worker
#   options: {command: [/usr/bin/perl, .../jsonl-worker.pl], config: {path: /var/log/bus.jsonl}}
# config.die_on: a body with this top-level key set kills the worker with
# SIGSEGV (to try crash isolation; with config.gate, from its third attempt
# on only once that file exists); hang_on: its first attempt never answers.
use strict;
use warnings;
use JSON::PP;
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);

my $json = JSON::PP->new->canonical;
my $fd = $ENV{FANHUB_WORKER_FD} // 3;
open(my $sock, '+<&=', $fd) or die "fd $fd: $!\n";
binmode $sock;
my $buf = '';

sub frame { my ($type, $data) = @_; return pack('N', 1 + length $data) . $type . $data }

sub put {
    my $data = join '', @_;
    while (length $data) {
        my $n = syswrite($sock, $data) // die "write: $!\n";
        substr($data, 0, $n) = '';
    }
}

# The next whole frame in $buf as (type, payload), or () when there is none.
sub take {
    return () if length $buf < 4;
    my $len = unpack('N', $buf);
    die "protocol error: a frame of length 0\n" if $len == 0;
    return () if length $buf < 4 + $len;
    my $frame = substr($buf, 4, $len);
    substr($buf, 0, 4 + $len) = '';
    return (substr($frame, 0, 1), substr($frame, 1));
}

sub fill { my $n = sysread($sock, $buf, 1 << 20, length $buf) // die "read: $!\n"; return $n }

sub now_ns { return int(clock_gettime(CLOCK_MONOTONIC) * 1e9) }

my ($type, $hello);
until (($type, $hello) = take()) { fill() or exit 0 }
die "expected HELLO, got '$type'\n" unless $type eq 'H';
my $config = $json->decode($hello)->{options}{config} // {};
my $out;
unless ($config->{path} && open($out, '>>', $config->{path})) {
    put(frame('E', $json->encode({error => "config.path: " . ($config->{path} ? "$!" : "missing")})));
    exit 1;
}
$out->autoflush(1);
put(frame('R', $json->encode({protocol => 1, name => 'jsonl-worker.pl', version => '1.0'})));

my @answers;
while (1) {
    my ($t, $p) = take();
    unless (defined $t) {           # all read: answer them in one write
        put(@answers);
        @answers = ();
        fill() or exit 0;
        next;
    }
    if ($t eq 'Q') { put(@answers); exit 0 }
    die "protocol error: frame type '$t'\n" unless $t eq 'M';
    my $start = now_ns();
    my ($ticket, $seq, $attempt, $received, $idlen) = unpack('Q> Q> N q> n', $p);
    my $at = 30 + $idlen;
    my $count = unpack('N', substr($p, $at, 4));
    $at += 4;
    my @frames;
    for (1 .. $count) {
        my $len = unpack('N', substr($p, $at, 4));
        push @frames, substr($p, $at + 4, $len);
        $at += 4 + $len;
    }
    my $body = eval { $json->decode($frames[1]) } // $frames[1];
    my $flag = sub { ref $body eq 'HASH' && $_[0] && $body->{$_[0]} };
    if ($flag->($config->{die_on})) {  # gate: from the 3rd attempt on, wait for that file
        select(undef, undef, undef, 0.01) until !$config->{gate} || $attempt < 3 || -e $config->{gate};
        kill 'SEGV', $$;
    }
    if ($flag->($config->{hang_on}) && $attempt == 1) { sleep 60 while 1 }
    print $out $json->encode({seq => $seq, attempt => $attempt, pid => $$, start => $start,
                              end => now_ns(), topic => $frames[0], body => $body}), "\n";
    push @answers, pack('N C Q> C n', 12, ord 'A', $ticket, 0, 0);
}
