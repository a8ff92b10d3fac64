"""The quiz's questions (grade.py --quiz): each one under one id, its languages side by side.

Pure data, imported by quiz.py and by messages.py, which adds QUIZ_TEXT to
its tables: so every question exists in every language with the same
placeholders, and the test that keeps the message tables complete covers
the quiz too. A
placeholder names an observation of the run (quiz.observations computes them
all from the evidence); no value the questions quote is typed here.
"""
import collections

Question = collections.namedtuple("Question", "id answer texts")
Text = collections.namedtuple("Text", "observed question choices explanation")

QUESTIONS = (
    # What each row of the evidence table proves, and what it does not prove about the next.
    Question("ack-is-not-the-mark", "b", {
        "en": Text(
            observed="crash-after-ack: publisher #1 exited {crash_exit} right after it saw the ACK ({crash_ack}); "
                     "the source's outbox says {crash_outbox:term}; the sink's inbox row is {crash_inbox:term} "
                     "and its inventory is {crash_inventory}.",
            question="What does this column of the evidence table prove?",
            choices=(
                "That snack-7 was lost: publisher #1 died before it finished, so the sink's inventory cannot be trusted.",
                "That the sink applied snack-7 once and the publisher held proof of it, but died before recording the mark.",
                "That the source is out of date: an ACK proves delivery, so the outbox row should be set to sent by hand.",
                "That the sink went too far: it must not apply an event that the source still calls pending.",
            ),
            explanation="Each row is a separate observation, and no stage proves the next: the ACK row is what "
                        "publisher #1 held, the outbox row what the source recorded, and the process died between "
                        "the two (exit {crash_exit}). Neither DB is wrong. See docs/lab.md, \"Reading it\".",
        ),
        "ja": Text(
            observed="crash-after-ackで、パブリッシャー1号はACK（{crash_ack}）を受け取った直後に、終了コード{crash_exit}で"
                     "終了しました。受付DBのoutboxは「{crash_outbox:term}」、倉庫のinboxの行は「{crash_inbox:term}」、"
                     "在庫は{crash_inventory}です。",
            question="証拠の表のこの列から、何が言えますか。",
            choices=(
                "snack-7は失われた。パブリッシャー1号が途中で終了したので、倉庫の在庫は信用できない。",
                "倉庫はsnack-7を1回適用し、パブリッシャーはその証拠を受け取ったが、完了印を保存する前に終了した。",
                "受付DBの情報が古い。ACKは配信の証拠なので、outboxの行を手作業で完了にすべきである。",
                "倉庫が先走った。受付DBでまだ未完了のイベントを、倉庫が適用してはいけない。",
            ),
            explanation="行はそれぞれ別々の観測で、1つの段階が次の段階を自動的に証明するわけではありません。ACKの行は"
                        "パブリッシャー1号が受け取ったもの、outboxの行は受付DBが記録したものであり、プロセスはその2つの"
                        "あいだで終了しました（終了コード{crash_exit}）。どちらのDBも間違っていません。"
                        "docs/lab.ja.mdの「表の読み方」を参照してください。",
        ),
    }),
    Question("no-ack-is-no-proof", "c", {
        "en": Text(
            observed="dropped-response: publisher #1 raised {drop_error} and saw no ACK ({drop_ack:term}); yet the "
                     "sink's inbox row is {drop_inbox:term}, its deliveries read {drop_deliveries:terms}, and its "
                     "inventory is {drop_inventory}.",
            question="What does the missing ACK tell you about the sink?",
            choices=(
                "That the sink never received snack-7, so sending it again will be its first delivery.",
                "That the sink refused snack-7, so sending it again will be refused as well.",
                "Nothing on its own: the sink may or may not have applied it; only the sink's own rows can say.",
                "That the sink applied snack-7 twice: once for the request and once for the lost answer.",
            ),
            explanation="The lack of an ACK is not evidence that nothing happened: in this run the sink committed "
                        "the receipt (inventory {drop_inventory}), then the answer was lost. The publisher cannot "
                        "tell that from a request that never arrived, so snack-7 stays {drop_outbox:term}. "
                        "See docs/lab.md, \"Reading it\".",
        ),
        "ja": Text(
            observed="dropped-responseで、パブリッシャー1号は{drop_error}を送出し、受け取ったACKは「{drop_ack:term}」"
                     "でした。それでも、倉庫のinboxの行は「{drop_inbox:term}」、deliveriesは「{drop_deliveries:terms}」、"
                     "在庫は{drop_inventory}です。",
            question="ACKが返ってこなかったことから、倉庫について何が言えますか。",
            choices=(
                "倉庫はsnack-7を受け取っていない。だから再送すれば、それが最初の配信になる。",
                "倉庫はsnack-7を拒否した。だから再送しても、やはり拒否される。",
                "それだけでは何も言えない。倉庫が適用したかどうかは、倉庫自身の行を見なければ分からない。",
                "倉庫はsnack-7を2回適用した。リクエストの分と、失われた応答の分である。",
            ),
            explanation="ACKがないことは、何も起こらなかった証拠にはなりません。この実行では、倉庫が受信の記録を"
                        "コミットし（在庫{drop_inventory}）、そのあとで応答が失われました。パブリッシャーからは"
                        "リクエストが届かなかった場合と区別できないので、snack-7は「{drop_outbox:term}」のまま残ります。"
                        "docs/lab.ja.mdの「表の読み方」を参照してください。",
        ),
    }),
    Question("two-deliveries-one-application", "a", {
        "en": Text(
            observed="crash-after-ack, after publisher #2 (exit {crash_final_exit}): the sink's deliveries read "
                     "{crash_final_deliveries:terms}, its inventory is {crash_final_inventory}, and the source says "
                     "{crash_final_outbox:term}.",
            question="What does the second entry in the sink's deliveries prove?",
            choices=(
                "That the same id arrived a second time and the inbox recognised it: a second delivery, no second effect.",
                "That snack-7 was applied twice, and the grader corrected the inventory afterwards.",
                "That publisher #2 sent a different event which happened to carry the same quantity.",
                "That the sink lost the effect of the first delivery and applied the second one instead.",
            ),
            explanation="The deliveries log keeps every copy that reached receive; the inbox row turns the second into "
                        "a duplicate, so the inventory stays {crash_final_inventory}, not 14. Two deliveries, one "
                        "application: the property the grader proves. See docs/participants.md, \"The checks\" (crash-after-ack).",
        ),
        "ja": Text(
            observed="crash-after-ackで、パブリッシャー2号（終了コード{crash_final_exit}）のあと、倉庫のdeliveriesは"
                     "「{crash_final_deliveries:terms}」、在庫は{crash_final_inventory}、受付DBのoutboxは"
                     "「{crash_final_outbox:term}」です。",
            question="倉庫のdeliveriesにある2つ目の記録は、何を立証していますか。",
            choices=(
                "同じIDがもう一度届き、inboxがそれを見分けた。2回目の配信はあったが、2度目の効果はなかった。",
                "snack-7は2回適用され、在庫はあとから採点ツールが修正した。",
                "パブリッシャー2号が、たまたま同じ数量を持つ別のイベントを送った。",
                "倉庫は1回目の配信の効果を失い、代わりに2回目の配信を適用した。",
            ),
            explanation="deliveriesには、receiveに届いたすべての写しが残ります。inboxに行があるので2つ目は重複になり、"
                        "在庫は14ではなく{crash_final_inventory}のままです。これが採点ツールの立証する性質、"
                        "2回の配信・1回の適用です。docs/participants.ja.mdの「チェック一覧」（crash-after-ack）を参照してください。",
        ),
    }),
    # Why re-sending with the same id is safe, and deleting to remove the doubt is not.
    Question("resend-with-the-same-id", "c", {
        "en": Text(
            observed="crash-after-ack, after publisher #1 (exit {crash_exit}): the source says {crash_outbox:term}, "
                     "while the sink already holds inventory {crash_inventory}.",
            question="You find exactly this state on a live system. What do you do?",
            choices=(
                "Delete the outbox row: the sink already has the event, so the row is only a leftover.",
                "Mark the row sent by hand, since the sink's inventory shows that the delivery happened.",
                "Run the publisher again: it sends snack-7 again with the same id, and the sink's answer settles it.",
                "Send snack-7 again under a new id, so that the sink does not take it for a duplicate.",
            ),
            explanation="Publisher #2 did exactly that in this run: the sink logged {crash_final_deliveries:terms}, "
                        "the inventory stayed {crash_final_inventory} and the row became {crash_final_outbox:term}. "
                        "Under a new id it would have been applied as a new event (inventory 14). See docs/lab.md, "
                        "\"Why re-send with the same id, and never delete\".",
        ),
        "ja": Text(
            observed="crash-after-ackで、パブリッシャー1号（終了コード{crash_exit}）のあと、受付DBのoutboxは"
                     "「{crash_outbox:term}」ですが、倉庫の在庫はすでに{crash_inventory}です。",
            question="本番のシステムで、これと同じ状態を見つけました。どうしますか。",
            choices=(
                "outboxの行を削除する。倉庫はもうイベントを持っているので、この行は残りかすにすぎない。",
                "倉庫の在庫が配信の事実を示しているので、行を手作業で完了にする。",
                "パブリッシャーをもう一度実行する。snack-7は同じIDで再送され、倉庫の応答で決着する。",
                "倉庫に重複と見なされないように、snack-7を新しいIDで送り直す。",
            ),
            explanation="この実行では、パブリッシャー2号がまさにそうしました。倉庫のdeliveriesは"
                        "「{crash_final_deliveries:terms}」、在庫は{crash_final_inventory}のままで、行は"
                        "「{crash_final_outbox:term}」になりました。新しいIDで送っていれば新しいイベントとして適用され、"
                        "在庫は14になっていたはずです。docs/lab.ja.mdの「同じIDで再送し、決して削除しない理由」を"
                        "参照してください。",
        ),
    }),
    Question("never-delete-the-doubt", "d", {
        "en": Text(
            observed="dropped-response, after publisher #1: its dispatch let out \"{drop_message}\"; the source "
                     "says {drop_outbox:term}; the sink's inventory is {drop_inventory}.",
            question="Why is deleting the pending outbox row, or marking it sent by hand, the wrong way to end "
                     "this doubt?",
            choices=(
                "It is wrong only because the sink happened to commit here; had it seen nothing, deleting would be right.",
                "Because SQLite refuses to delete a row while another process has the file open.",
                "Because the sink would then refuse every later event that comes from this source.",
                "Because the publisher cannot tell this from a request that never arrived: deleting loses the order "
                "then, and destroys the evidence either way.",
            ),
            explanation="Re-sending with the same id is right in both cases: a first delivery is applied, a second one "
                        "is a duplicate with no second effect; deleting is right in neither. Nothing is deleted to make "
                        "the uncertainty go away. See docs/lab.md, \"Why re-send with the same id, and never delete\".",
        ),
        "ja": Text(
            observed="dropped-responseで、パブリッシャー1号のdispatchは「{drop_message}」をそのまま伝えました。"
                     "受付DBのoutboxは「{drop_outbox:term}」、倉庫の在庫は{drop_inventory}です。",
            question="未完了のoutboxの行を削除したり、手作業で完了にしたりしてこの疑いを消すのは、なぜ間違いですか。",
            choices=(
                "ここで間違いなのは、倉庫がたまたまコミットしていたからにすぎない。何も届いていなければ、削除が正しかった。",
                "別のプロセスがファイルを開いているあいだは、SQLiteが行の削除を拒否するから。",
                "削除すると、倉庫がこの受付DBから来る以降のイベントを、すべて拒否するようになるから。",
                "パブリッシャーからは、リクエストが届かなかった場合と区別できないから。その場合は注文を失い、"
                "どちらの場合も証拠を壊す。",
            ),
            explanation="同じIDでの再送は、どちらの場合にも正しい手です。届いていなければ最初の配信として適用され、"
                        "届いていれば2度目の効果を持たない重複になります。不確実性を消すためにデータを削除しては"
                        "いけません。docs/lab.ja.mdの「同じIDで再送し、決して削除しない理由」を参照してください。",
        ),
    }),
    # What the check covered, and what it did not.
    Question("what-the-check-covered", "b", {
        "en": Text(
            observed="crash-after-ack: publisher #1 ended with os._exit({crash_exit}) right after the ACK; publisher #2, "
                     "a new process, reopened the same source file and exited {crash_final_exit}; the grader read both "
                     "DB files with connections of its own: inventory {crash_final_inventory}, outbox "
                     "{crash_final_outbox:term}.",
            question="What did this run prove?",
            choices=(
                "That a committed transaction survives a power cut on this machine.",
                "That the property holds when a process is killed at the worst moment and new processes reopen the "
                "same files on the same, working disk.",
                "That the sink's DB survives a disk failure, since its inventory was still there afterwards.",
                "That delivery behaves over the internet just as it does over loopback.",
            ),
            explanation="os._exit({crash_exit}) ends a process, not the host: the files stay on the same disk with "
                        "everything SQLite had handed to the operating system. Whether a commit survives a power cut "
                        "depends on the disk, its cache and the file system, which no test here controls (SQLite's "
                        "\"Atomic Commit\"). See README, \"What this proves, and what it does not\".",
        ),
        "ja": Text(
            observed="crash-after-ackで、パブリッシャー1号はACKの直後にos._exit({crash_exit})で終了し、新しいプロセスで"
                     "あるパブリッシャー2号が同じ受付DBのファイルを開き直して、終了コード{crash_final_exit}で終わりました。"
                     "採点ツールが自分の接続で2つのDBファイルを読むと、在庫は{crash_final_inventory}、outboxは"
                     "「{crash_final_outbox:term}」でした。",
            question="この実行で立証されたのは、どれですか。",
            choices=(
                "コミット済みのトランザクションが、このマシンの電源遮断を乗り越えること。",
                "最悪の瞬間にプロセスが終了しても、同じ正常なディスクにある同じファイルを新しいプロセスが開き直せば、"
                "性質が保たれること。",
                "あとから在庫が残っていたので、倉庫DBがディスク障害を乗り越えること。",
                "インターネット越しでも、loopbackと同じように配信できること。",
            ),
            explanation="os._exit({crash_exit})で終わるのはプロセスであって、ホストではありません。ファイルは、SQLiteが"
                        "OSに渡したものをすべて持ったまま、同じディスクに残ります。コミットがホストの電源遮断を乗り越える"
                        "かどうかはディスクとそのキャッシュ、ファイルシステムに左右され（SQLiteの「Atomic Commit」）、"
                        "ここのテストはそのどれも制御していません。README.ja.mdの「立証すること、しないこと」を"
                        "参照してください。",
        ),
    }),
    Question("what-it-did-not-cover", "d", {
        "en": Text(
            observed="crash-after-ack: publisher #1 exited {crash_exit}, publisher #2 exited {crash_final_exit}; "
                     "dropped-response: publisher #1 raised {drop_error}, publisher #2 exited {drop_final_exit}; the "
                     "inventories ended at {crash_final_inventory} and {drop_final_inventory}.",
            question="Which of these did the checks you just ran NOT cover?",
            choices=(
                "A publisher killed right after the ACK, before it recorded the mark.",
                "A response lost after the sink had committed the receipt.",
                "A new publisher process reopening the files that a killed one left behind.",
                "The sink's DB restored from last night's backup.",
            ),
            explanation="A sink restored from an older copy has forgotten the ids it applied since, and applies them "
                        "again; a restored source has lost the orders taken in since. Restores, power loss, disk failure "
                        "and performance over the internet are other tests. See docs/reliability.md, \"What is not covered\".",
        ),
        "ja": Text(
            observed="crash-after-ackでは、パブリッシャー1号が終了コード{crash_exit}、パブリッシャー2号が終了コード"
                     "{crash_final_exit}で終わりました。dropped-responseでは、パブリッシャー1号が{drop_error}を送出し、"
                     "パブリッシャー2号が終了コード{drop_final_exit}で終わりました。最後の在庫は、crash-after-ackが"
                     "{crash_final_inventory}、dropped-responseが{drop_final_inventory}です。",
            question="いま実行したチェックの対象に含まれていないのは、どれですか。",
            choices=(
                "ACKの直後、完了印を保存する前に終了させられたパブリッシャー。",
                "倉庫が受信の記録をコミットしたあとで失われた応答。",
                "終了させられたプロセスが残したファイルを、新しいパブリッシャーのプロセスが開き直すこと。",
                "前夜のバックアップから復旧した倉庫DB。",
            ),
            explanation="古いコピーから復旧した倉庫は、それ以降に適用したIDを忘れていて、もう一度適用します。復旧した"
                        "受付DBは、それ以降に受け付けた注文を失っています。バックアップからの復旧、ホストの電源遮断、"
                        "ディスク障害、インターネット上での性能は、別の検証です。docs/reliability.ja.mdの「対象外のこと」を"
                        "参照してください。",
        ),
    }),
    Question("one-sending-loop", "a", {
        "en": Text(
            observed="crash-after-ack: publisher #2 started only after publisher #1 had exited {crash_exit}, one "
                     "publisher at a time; the sink logged {crash_final_deliveries:terms}.",
            question="To go faster, a colleague wants to run two relays on the same source DB. What does this run "
                     "tell you about that?",
            choices=(
                "Nothing: it ran one sending loop at a time. With no claim, lease or fencing, two publishers read the "
                "same pending rows; run one relay per source DB.",
                "That it is safe: the inbox turned the second delivery into a duplicate, so any number of publishers "
                "will do.",
                "That it is safe as long as both relays take batches of one item (--limit 1).",
                "That throughput doubles, since the two deliveries here were made by two processes.",
            ),
            explanation="The checks prove the order of one sending loop. Two publishers on one source DB pick the same "
                        "pending rows and send them at once, and nothing decides who owns a batch, so neither seq "
                        "order nor stop-on-first-failure holds across them. See README, \"What this proves, and what "
                        "it does not\".",
        ),
        "ja": Text(
            observed="crash-after-ackで、パブリッシャー2号が動き始めたのは、パブリッシャー1号が終了コード{crash_exit}で"
                     "終わったあとです。パブリッシャーは常に1つだけで、倉庫のdeliveriesは「{crash_final_deliveries:terms}」"
                     "でした。",
            question="速くするために、同じ受付DBでリレーを2つ動かしたいという提案がありました。この実行から、それについて"
                     "何が言えますか。",
            choices=(
                "何も言えない。この実行の送信ループは一度に1つだった。claim・lease・fencingがないので、2つの"
                "パブリッシャーは同じ未完了の行を読む。リレーは受付DB 1つにつき1つにする。",
                "安全だと言える。inboxが2回目の配信を重複にしたので、パブリッシャーはいくつあってもよい。",
                "どちらのリレーもバッチを1件ずつ（--limit 1）にすれば、安全だと言える。",
                "ここでは2回の配信を2つのプロセスが行ったので、処理量は2倍になると言える。",
            ),
            explanation="チェックが立証するのは、1つの送信ループの順序です。1つの受付DBを2つのパブリッシャーが使うと、"
                        "同じ未完了の行を選んで同時に送り、どちらがバッチを受け持つかを決めるものもないので、seqの順序も"
                        "stop-on-first-failureも成り立ちません。README.ja.mdの「立証すること、しないこと」を参照して"
                        "ください。",
        ),
    }),
    # What an operator watches, and why not the count of successful sends.
    Question("watch-each-gauge", "c", {
        "en": Text(
            observed="dropped-response: publisher #1's send failed ({drop_error}), yet the sink applied snack-7 "
                     "(inventory {drop_inventory}); publisher #2's send succeeded, and the sink logged "
                     "{drop_final_deliveries:terms}.",
            question="As an operator, what do you watch, rather than the count of successful sends?",
            choices=(
                "The count of successful sends after all: as long as it keeps growing, the outbox is healthy.",
                "The error rate of the HTTP requests, and nothing else: errors are what an operator acts on.",
                "The pending count, the age of the oldest pending item, attempts, duplicates and conflicts, each on "
                "its own.",
                "The sink's inventory alone: the business effect is the only figure that matters.",
            ),
            explanation="Here a failed send had an effect and a successful one was only a duplicate: a count of "
                        "successful sends shows neither. The age of the oldest pending item grows whatever the cause "
                        "(sink down, relay stopped, head stuck), and duplicates and conflicts say what the sink saw. "
                        "See docs/operating.md, \"Operating it\".",
        ),
        "ja": Text(
            observed="dropped-responseで、パブリッシャー1号の送信は{drop_error}で失敗しましたが、倉庫はsnack-7を"
                     "適用しています（在庫{drop_inventory}）。パブリッシャー2号の送信は成功し、倉庫のdeliveriesは"
                     "「{drop_final_deliveries:terms}」になりました。",
            question="運用者は、送信成功の回数の代わりに、何を見ますか。",
            choices=(
                "やはり送信成功の回数を見る。増え続けていれば、outboxは健全である。",
                "HTTPリクエストのエラー率だけを見る。運用者が対処するのはエラーである。",
                "未完了の項目数、最も古い未完了の経過時間、試行回数、受信の重複数、衝突数を、それぞれ分けて見る。",
                "倉庫の在庫だけを見る。業務上の効果こそが、意味のある唯一の数値である。",
            ),
            explanation="この実行では、失敗した送信に効果があり、成功した送信は重複にすぎませんでした。送信成功の回数"
                        "からは、そのどちらも分かりません。最も古い未完了の経過時間は原因が何であれ（倉庫の停止、"
                        "リレーの停止、先頭の詰まり）増えていき、受信の重複数と衝突数は倉庫が見たものを示します。"
                        "docs/operating.ja.mdの「運用する」を参照してください。",
        ),
    }),
    # Alert, quarantine, fix, requeue; a quarantine is no success, and its reordering is recorded.
    Question("quarantine-is-not-success", "a", {
        "en": Text(
            observed="dropped-response: publisher #1's batch stopped at snack-7 on {drop_error}, and snack-7 stayed "
                     "{drop_outbox:term} until publisher #2 delivered it.",
            question="Suppose instead that the sink will never accept the head item (a conflict, every time), so "
                     "every item behind it waits. What is the right procedure?",
            choices=(
                "Alert, quarantine the item so the others flow, fix it, requeue it; the quarantine stays an open "
                "incident, and the items that overtook it are recorded.",
                "Retry it forever with a short, fixed delay, since re-sending with the same id is always safe.",
                "Mark it sent by hand so that the line moves on, and write its id in a ticket for later.",
                "Delete the item and its order, since a conflict shows that the event was never valid.",
            ),
            explanation="A quarantined item is not delivered: it is an open incident, never a success. Taking it out "
                        "of line lets later items overtake it, which changes the order, so the kit records every seq "
                        "sent meanwhile (overtaken_by). See docs/operating.md, \"Alert, quarantine, fix, requeue\".",
        ),
        "ja": Text(
            observed="dropped-responseで、パブリッシャー1号のバッチはsnack-7で{drop_error}により止まり、snack-7は"
                     "パブリッシャー2号が配信するまで「{drop_outbox:term}」のまま残りました。",
            question="では、倉庫が先頭の項目を決して受け付けず（毎回衝突になる）、その後ろの項目がすべて待たされている"
                     "とします。正しい手順はどれですか。",
            choices=(
                "アラートを出し、ほかの項目が流れるように隔離し、修正してから再投入する。隔離は未解決の障害として"
                "残し、その項目を追い越した項目を記録する。",
                "同じIDでの再送は常に安全なので、短い一定の間隔で無限にリトライする。",
                "キューが進むように手作業で完了にし、IDはあとで見るためにチケットに書いておく。",
                "衝突はイベントがもともと無効だった証拠なので、その項目と注文を削除する。",
            ),
            explanation="隔離した項目は配信されたわけではなく、未解決の障害であって、決して成功ではありません。キュー"
                        "から外すと後ろの項目がそれを追い越して順序が入れ替わるので、キットはそのあいだに完了したseqを"
                        "すべて記録します（overtaken_by）。docs/operating.ja.mdの「アラート・隔離・修正・再投入」を参照して"
                        "ください。",
        ),
    }),
    # Why retries need a cap and jitter.
    Question("retry-cap-and-jitter", "d", {
        "en": Text(
            observed="dropped-response: publisher #1 failed with {drop_error}; publisher #2, started afterwards, "
                     "delivered snack-7, and the source says {drop_final_outbox:term}.",
            question="The relay retries a failed batch by itself. Why must its retries have a cap and jitter?",
            choices=(
                "The cap keeps the outbox table small, and the jitter makes the log easier to read.",
                "Neither is needed: re-sending with the same id is safe, so retrying as fast as possible is best.",
                "The jitter guarantees that the second delivery of an event is never a duplicate.",
                "Without a cap, an item that never succeeds is retried forever and nobody is alerted; without jitter, "
                "publishers that failed together all retry together.",
            ),
            explanation="Re-sending with the same id is safe, which is why retrying is allowed at all; safe is not "
                        "free. The relay waits a random time up to min(--max-delay, --base-delay * 2^(n-1)) and "
                        "alerts once the sink has refused the head item --max-attempts times, while dispatch itself "
                        "does one finite batch per call. See docs/operating.md, \"Operating it\" (the relay).",
        ),
        "ja": Text(
            observed="dropped-responseで、パブリッシャー1号は{drop_error}で失敗し、あとから起動したパブリッシャー2号が"
                     "snack-7を配信して、受付DBのoutboxは「{drop_final_outbox:term}」になりました。",
            question="リレーは、失敗したバッチを自分でリトライします。そのリトライに上限とジッターが必要なのは、なぜですか。",
            choices=(
                "上限はoutboxのテーブルを小さく保つため、ジッターはログを読みやすくするため。",
                "どちらも要らない。同じIDでの再送は安全なので、できるだけ速くリトライするのが最善である。",
                "ジッターがあれば、イベントの2回目の配信が重複にならないことが保証されるから。",
                "上限がないと、決して成功しない項目を無限にリトライし続け、誰にもアラートが届かない。ジッターがないと、"
                "一緒に失敗したパブリッシャーが一斉にリトライする。",
            ),
            explanation="同じIDでの再送が安全だからこそリトライが許されますが、安全でもコストはかかります。リレーは0から"
                        "min(--max-delay, --base-delay * 2^(n-1))までのランダムな時間だけ待ち、倉庫が先頭の項目を"
                        "--max-attempts回拒否するとアラートを出します。dispatch自体は、呼び出し1回につき有限の1バッチだけを"
                        "処理します。docs/operating.ja.mdの「運用する」（リレー）を参照してください。",
        ),
    }),
    # Stop on the first failure, versus skipping the failed item.
    Question("stop-on-first-failure", "b", {
        "en": Text(
            observed="dropped-response: publisher #1's dispatch let {drop_error} out at snack-7; snack-7 stayed "
                     "{drop_outbox:term}, and publisher #2 started again from it.",
            question="In a batch A, B, C, the send for B fails. What must dispatch do, and why not skip B?",
            choices=(
                "Mark B sent so that the batch completes, then send C; the relay will notice B later.",
                "Stop at B and let its original error out: A stays sent, B and C stay pending, the next call resumes "
                "at B; skipping B would reorder items where order matters.",
                "Skip B, send C and come back to B at the end, because one bad item must not block the others.",
                "Roll A back as well, so that the whole batch stays all-or-nothing.",
            ),
            explanation="Stop-on-first-failure is a contract the lab chose on purpose: A is done, B failed, C was never "
                        "tried, and each state stays recorded. Skipping a failed item is possible in some systems, but "
                        "it means something else wherever order matters. See docs/lab.md, step 7 (dispatch).",
        ),
        "ja": Text(
            observed="dropped-responseで、パブリッシャー1号のdispatchはsnack-7で{drop_error}をそのまま呼び出し元に"
                     "伝えました。snack-7は「{drop_outbox:term}」のまま残り、パブリッシャー2号はそこから再開しました。",
            question="A・B・Cのバッチで、Bのsendが失敗しました。dispatchは何をしなければならず、なぜBを飛ばしては"
                     "いけないのですか。",
            choices=(
                "バッチを終わらせるためにBに完了印を付けてから、Cを送る。Bには、あとでリレーが気づく。",
                "Bで止まり、Bの元のエラーをそのまま伝える。Aは完了、BとCは未完了のまま残り、次の呼び出しはBから"
                "再開する。Bを飛ばすと、順序が重要な業務で順序が入れ替わる。",
                "1つの悪い項目がほかを塞いではいけないので、Bを飛ばしてCを送り、最後にBに戻る。",
                "バッチ全体をすべてか無かにするため、Aも元に戻す。",
            ),
            explanation="stop-on-first-failureは、このラボが明示的に選んだ契約です。Aは完了、Bは失敗、Cはまだ試して"
                        "いない、という状態がそれぞれ記録されます。失敗した項目を飛ばすポリシーもシステムによっては"
                        "可能ですが、順序が重要な業務なら別の意味になります。docs/lab.ja.mdの手順7（dispatch）を"
                        "参照してください。",
        ),
    }),
)

LETTERS = "abcdefgh"


def flatten(questions):
    """{lang: {message id: text}}: "quiz.<id>.observed", ".question", ".choice.<letter>", ".explanation"."""
    tables = {}
    for question in questions:
        for lang, text in question.texts.items():
            table = tables.setdefault(lang, {})
            prefix = "quiz.%s." % question.id
            table[prefix + "observed"] = text.observed
            table[prefix + "question"] = text.question
            for letter, choice in zip(LETTERS, text.choices):
                table[prefix + "choice." + letter] = choice
            table[prefix + "explanation"] = text.explanation
    return tables


QUIZ_TEXT = flatten(QUESTIONS)
